"""Synthetic videos and frame folders whose frames carry their own index.

Every frame draws its number as a 4x4 grid of dark/bright blocks (16 bits, least significant bit
top-left) over the top three quarters of the picture, so a test can tell exactly which frames a
sampler decoded, even after lossy MPEG-4/JPEG compression and resizing. The bottom quarter holds a
seeded texture that slides by a few pixels per frame, so the encoder sees motion as in real footage.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from PIL import Image

_COLS, _ROWS = 4, 4
_BITS = _COLS * _ROWS
_CODE_AREA = 0.75  # fraction of the height used by the code grid


def _palette(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A bright and a dark BGR colour per seed; their luma differs by >150, far beyond codec noise."""
    rng = np.random.default_rng(seed)
    return rng.integers(205, 256, 3, dtype=np.uint8), rng.integers(0, 50, 3, dtype=np.uint8)


def _texture(width: int, height: int, seed: int) -> np.ndarray:
    """A smooth random BGR texture twice as wide as the frame, to slide across the bottom band."""
    coarse = np.random.default_rng(seed + 1).integers(
        0, 256, (max(height // 8, 1), max(width // 4, 1), 3), dtype=np.uint8
    )
    return cv2.resize(coarse, (2 * width, height), interpolation=cv2.INTER_LINEAR)


def _cell_bounds(width: int, height: int) -> list[tuple[int, int, int, int]]:
    """(x0, y0, x1, y1) of each code cell, bit 0 first."""
    code_h = height * _CODE_AREA
    return [
        (
            round(c * width / _COLS),
            round(r * code_h / _ROWS),
            round((c + 1) * width / _COLS),
            round((r + 1) * code_h / _ROWS),
        )
        for r in range(_ROWS)
        for c in range(_COLS)
    ]


def _draw(index: int, width: int, height: int, bright: np.ndarray, dark: np.ndarray, texture: np.ndarray) -> np.ndarray:
    if not 0 <= index < 2**_BITS:
        raise ValueError(f"frame index {index} does not fit in {_BITS} bits")
    frame = np.empty((height, width, 3), dtype=np.uint8)
    cells = _cell_bounds(width, height)
    for bit, (x0, y0, x1, y1) in enumerate(cells):
        frame[y0:y1, x0:x1] = bright if index >> bit & 1 else dark
    band_top = cells[-1][3]
    shift = 3 * index % width
    frame[band_top:] = texture[band_top:, shift : shift + width]
    return frame


def decode_frame_index(image: Image.Image | np.ndarray) -> int:
    """The number drawn into a frame by `make_video`/`make_frame_folder` (any size, RGB or BGR)."""
    gray = np.asarray(image.convert("L") if isinstance(image, Image.Image) else image, dtype=np.float32)
    if gray.ndim == 3:
        gray = gray.mean(axis=2)
    height, width = gray.shape
    index = 0
    for bit, (x0, y0, x1, y1) in enumerate(_cell_bounds(width, height)):
        # Read only the middle half of each cell: its edges are where compression and resizing blur.
        dx, dy = (x1 - x0) // 4, (y1 - y0) // 4
        if gray[y0 + dy : y1 - dy, x0 + dx : x1 - dx].mean() > 127.5:
            index |= 1 << bit
    return index


def make_video(
    path: str | Path, *, seconds: float, fps: float = 10, width: int = 160, height: int = 120, seed: int = 0
) -> Path:
    """Write an MPEG-4 (mp4v) video of round(seconds * fps) frames; frame i shows the number i."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
    if not writer.isOpened():
        raise RuntimeError(f"OpenCV cannot write {path} (is its ffmpeg backend available?)")
    bright, dark = _palette(seed)
    texture = _texture(width, height, seed)
    try:
        for i in range(round(seconds * fps)):
            writer.write(_draw(i, width, height, bright, dark, texture))
    finally:
        writer.release()
    return path


def make_frame_folder(
    folder: str | Path,
    *,
    num_frames: int,
    width: int = 160,
    height: int = 120,
    start_number: int = 0,
    step: int = 1,
    ext: str = "jpg",
    seed: int = 0,
) -> Path:
    """Write `frame_<n>.<ext>` for n = start_number, start_number + step, ...; each image shows n.

    Names are not zero-padded on purpose: a reader must sort them by number, not as text.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bright, dark = _palette(seed)
    texture = _texture(width, height, seed)
    for i in range(num_frames):
        number = start_number + i * step
        cv2.imwrite(str(folder / f"frame_{number}.{ext}"), _draw(number, width, height, bright, dark, texture))
    return folder
