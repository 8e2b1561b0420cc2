"""Regenerate `schemas/` from the models (`make schemas`)."""

from __future__ import annotations

from pathlib import Path

from cltoolkit._io import atomic_write_text
from cltoolkit.schemas import generate_all


def main() -> None:
    out = Path(__file__).resolve().parent.parent / "schemas"
    for name, text in generate_all().items():
        atomic_write_text(out / name, text)
        print(f"wrote {out / name}")


if __name__ == "__main__":
    main()
