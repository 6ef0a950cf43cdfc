"""In-process static embeddings (model2vec): no server, no torch, fast on a CPU.

The model loads on first use, not at construction, so a stdio MCP server answers
`initialize` before the 15 MB model (and model2vec itself) is read.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vault_brain.config import EmbedSettings
from vault_brain.embed.base import l2_normalise
from vault_brain.errors import Unavailable
from vault_brain.log import event

if TYPE_CHECKING:
    import numpy as np

    from vault_brain.embed.static import StaticModelFile

BUNDLED_MODEL = Path(__file__).resolve().parent / "models" / "minilm-static-256"

# "owner/name" or "name" as the Hugging Face hub spells repository ids.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def _source(model: str) -> tuple[Path | str, str]:
    """Where the model comes from (a folder or a hub id) and the name recorded in the index."""
    if not model.strip():
        return BUNDLED_MODEL, BUNDLED_MODEL.name
    folder = Path(model).expanduser()
    if folder.exists() or not _HUB_ID.match(model) or model.startswith("."):
        # A path, even a missing one: the load reports it, the constructor never fails.
        return folder.resolve(), folder.resolve().name
    return model, model


class LocalEmbedder:
    """A model2vec StaticModel from a folder, a hub id, or the bundled minilm-static-256."""

    def __init__(self, settings: EmbedSettings) -> None:
        self._source, label = _source(settings.model)
        # What a parse worker builds the same model from (index/workers.py): a big pass
        # makes its vectors there, beside the parsing, on every core.
        self.worker_settings = settings
        self.name = f"local:{label}"
        # What a cosine means (search/calibration.py), measured for the bundled model on the
        # question sets: the best note of an off-topic or made-up question scores 0.2-0.77
        # in English (0.4-0.86 in de/fr/es, up to 0.96 in ja, where most of its tokens are
        # unknown to it), real answers 0.71-0.95. Only cosines from 0.8 count as evidence;
        # below that the full text decides. Not claimed as measured (`cosine_scale_measured`
        # is False): the text arm keeps its low floor beside it.
        self.cosine_scale = (0.8, 0.15)
        self._batch_size = settings.batch_size
        self._model: Any = None
        self._dim = 0
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _load(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            start = time.perf_counter()
            if isinstance(self._source, Path) and not self._source.is_dir():
                raise Unavailable(f"embedding model folder {self._source} is not a folder")
            model = self._load_file() if isinstance(self._source, Path) else None
            if model is None:
                model = self._load_model2vec()
            self._dim = int(model.dim)
            self._model = model
            event(
                "embed_model_loaded",
                model=self.name,
                dim=self._dim,
                ms=round((time.perf_counter() - start) * 1000),
            )
            return model

    def _load_file(self) -> StaticModelFile | None:
        """The plain format straight from its files (no model2vec import: fast start)."""
        from vault_brain.embed.static import StaticModelFile

        try:
            return StaticModelFile.load(self._source)
        except Exception as exc:  # a damaged file: "no vectors now", as model2vec's errors
            raise Unavailable(
                f"cannot load embedding model {self.name} from folder ({type(exc).__name__})"
            ) from exc

    def _load_model2vec(self) -> _Model2Vec:
        try:
            from model2vec import StaticModel
        except ImportError as exc:  # pragma: no cover - a dependency of the package
            raise Unavailable("model2vec is not installed") from exc
        try:
            # A local folder never touches the network; a hub id uses the cache first.
            model = StaticModel.from_pretrained(
                self._source, quantize_to="float32", normalize=True, force_download=False
            )
        except Exception as exc:  # hub, file and format errors all mean "no vectors now"
            where = "hub id" if isinstance(self._source, str) else "folder"
            raise Unavailable(
                f"cannot load embedding model {self.name} from {where} "
                f"({type(exc).__name__}); a hub id needs the network the first time"
            ) from exc
        return _Model2Vec(model, self._batch_size)

    def dimension(self) -> int:
        self._load()
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        model = self._load()
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        vectors = model.encode(list(texts))
        return l2_normalise(np.nan_to_num(vectors, nan=0.0, posinf=0.0, neginf=0.0))


class _Model2Vec:
    """model2vec's StaticModel behind the same `encode` and `dim` as StaticModelFile."""

    def __init__(self, model: Any, batch_size: int) -> None:
        self.model, self.batch_size = model, batch_size
        self.dim = int(model.dim)

    def encode(self, texts: list[str]) -> np.ndarray:
        # No worker processes: this runs inside servers and watchers, not a batch job.
        return self.model.encode(texts, batch_size=self.batch_size, use_multiprocessing=False)
