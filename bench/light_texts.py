"""Texts that e5's light query encoder must embed to the same bits before and after a change
of its code: the question sets' questions in five languages, a spread of scripts, and edge
cases (empty, spaces only, very long, emoji, CJK, combining marks, control-token spellings,
runs of one character), with random Unicode strings from a fixed seed.

    .venv/bin/python -m bench.light_texts --out vectors.npy   # this checkout's vectors
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from pathlib import Path

CORPORA = Path("/work/shared/corpora/questions")
SCRIPTS = [
    "How do I sync my notes between devices?",
    "Как синхронизировать заметки между устройствами?",
    "如何在设备之间同步笔记？",
    "デバイス間でノートを同期するには？",
    "기기 간에 노트를 동기화하려면 어떻게 하나요?",
    "كيف أزامن ملاحظاتي بين الأجهزة؟",
    "ฉันจะซิงค์บันทึกระหว่างอุปกรณ์ได้อย่างไร",
    "मैं अपने नोट्स को उपकरणों के बीच कैसे सिंक करूँ?",
    "איך אני מסנכרן את ההערות שלי בין מכשירים?",
    "Πώς συγχρονίζω τις σημειώσεις μου;",
    "Notlarımı cihazlar arasında nasıl eşitlerim?",
    "Làm cách nào để đồng bộ ghi chú?",
    "ኖቶቼን እንዴት አመሳስላለሁ?",
    "নোট কীভাবে সিঙ্ক করব?",
    "குறிப்புகளை எப்படி ஒத்திசைப்பது?",
    "ნოტების სინქრონიზაცია",
    "Հայերեն նշումներ",
    "ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ",
    "ⲧⲙⲛⲧⲣⲙⲛⲕⲏⲙⲉ",
    "𝔣𝔯𝔞𝔨𝔱𝔲𝔯 𝕕𝕠𝕦𝕓𝕝𝕖 𝒮𝒸𝓇𝒾𝓅𝓉",
]
EDGES = [
    "",
    " ",
    "     ",
    "\t\n",
    "a  b\t\tc\n\n\nd  ",
    "\u00a0non-breaking\u00a0spaces\u2003and\u2009thin ones",
    "🦜🦜🦜 x 👩‍👩‍👧 🇫🇷 👍🏽",
    "🙂",
    "e\u0301te\u0301 \u0301ab café",
    "\u0301\u0302\u0303\u0304",
    "क्षत्रिय संस्कृत ภาษาไทย เก้า",
    "Donaudampfschifffahrtsgesellschaftskapitänswitwe" * 20,
    "a" * 5000,
    "x" * 1001,
    "=" * 40,
    "\u200b\u200d\ufeffzero width",
    "Ｆｕｌｌ ｗｉｄｔｈ ﬁ ligature ㎏ ½ Ⅻ ℌ",
    "strike <s>this</s> out <mask> <pad> <unk>",
    "mixed 混合 смесь مختلط",
    "|Name|Description|\n|----------|-----------------|\n|[CA2AEX::m_psz](#m_psz)|The data|",
    "std::vector<int>::iterator it = v.begin(); // C++",
    "x",
    "?",
    "\x00\x01\x02 control",
    "\ud7ff\ue000\uffff\U0010fffd",
    " ".join(SCRIPTS) * 3,
    "漢字" * 600,
    "한국어 " * 300,
]


def texts() -> list[str]:
    out: list[str] = []
    for name in sorted(CORPORA.glob("*.tsv")):
        with open(name, encoding="utf-8", newline="") as fh:
            rows = [r for r in csv.reader(fh, delimiter="\t") if r and not r[0].startswith("#")]
        out += [r[0] for r in rows[:40]]  # 40 questions of each set
    out += SCRIPTS + EDGES
    rng = random.Random(23)
    blocks = [
        (0x20, 0x7F),
        (0xA0, 0x2FF),
        (0x370, 0x52F),
        (0x590, 0x6FF),
        (0x900, 0xDFF),
        (0x1100, 0x11FF),
        (0x3040, 0x30FF),
        (0x4E00, 0x9FFF),
        (0xAC00, 0xD7A3),
        (0x1F300, 0x1FAFF),
        (0x300, 0x36F),
        (0xFF00, 0xFFEF),
    ]
    for _ in range(40):
        n = rng.choice([1, 3, 10, 40, 200])
        out.append("".join(chr(rng.randint(*rng.choice(blocks))) for _ in range(n)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--cache", required=True, help="the models folder to keep files in")
    args = parser.parse_args(argv)
    import numpy as np

    from vault_brain.embed.cache import ModelCache
    from vault_brain.embed.e5 import E5Embedder

    embedder = E5Embedder(cache=ModelCache(Path(args.cache)))
    every = texts()
    vectors = np.concatenate([embedder.embed_light_queries([t]) for t in every])
    batch = embedder.embed_light_queries(every[:16])  # a batch of 16 gives the same bits
    assert np.array_equal(batch, vectors[:16])
    np.save(args.out, vectors)
    print(len(every), "texts", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
