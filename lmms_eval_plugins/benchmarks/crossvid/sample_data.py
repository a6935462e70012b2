"""CrossVid's bundled sample data: synthetic media in the benchmark's real schema.

Written by ``lmms-eval-plugins sample-data crossvid`` (a test checks that regenerating changes nothing)."""

from __future__ import annotations

from pathlib import Path

from lmms_eval_plugins.safe_files import write_atomic

_CROSSVID_VIDEOS = {  # path under videos/ -> (seconds, seed)
    **{f"behavior/bh{k}.mp4": (5, 10 + k) for k in range(1, 5)},
    **{f"movie/mv{k}.mp4": (5, 20 + k) for k in range(1, 5)},
    "movie/mv5.mp4": (12, 25),
    **{f"cook/ck{k}.mp4": (6, 30 + k) for k in range(1, 5)},
    "cook/ck5.mp4": (12, 35),
    **{f"assembly/as{k}.mp4": (8, 40 + k) for k in range(1, 4)},
}
_CROSSVID_BOX = {"xtl": 40.5, "ytl": 60.0, "xbr": 81.9, "ybr": 100.2}


def _crossvid_box(dx: float, dy: float) -> dict[str, float]:
    return {k: v + (dx if k[0] == "x" else dy) for k, v in _CROSSVID_BOX.items()}


_CROSSVID_QA: dict[str, list[dict]] = {
    "BU": [
        {
            "id": 0,
            "videos": ["behavior/bh1.mp4", "behavior/bh2.mp4", "behavior/bh3.mp4"],
            "question": "In which videos does the animal drink water?",
            "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. None of the videos"],
            "answer": ["A", "C"],
        },
        {
            "id": 1,
            "videos": ["behavior/bh2.mp4", "behavior/bh4.mp4"],
            "question": "Which behaviours appear in both videos?",
            "options": ["A. Running", "B. Eating", "C. Sleeping", "D. Grooming"],
            "answer": "BD",
        },
    ],
    "NC": [
        {
            "id": 0,
            "videos": [f"movie/mv{k}.mp4" for k in range(1, 5)],
            "question": "Which clip shows the moment the two friends reconcile?",
            "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. Video 4"],
            "answer": "C",
        },
        {
            "id": 1,
            "videos": [f"movie/mv{k}.mp4" for k in (4, 3, 2, 1)],
            "question": "What do the four clips have in common?",
            "options": ["A. A chase", "B. A dinner", "C. A phone call", "D. A storm"],
            "answer": "A",
        },
    ],
    "CC": [
        {
            "id": 0,
            "videos": [f"cook/ck{k}.mp4" for k in range(1, 5)],
            "question": "In which video is the sauce thickened with flour?",
            "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. Video 4"],
            "answer": "B",
        },
        {
            "id": 1,
            "videos": [f"cook/ck{k}.mp4" for k in (2, 4, 1, 3)],
            "question": "Which video uses the most garlic?",
            "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. Video 4"],
            "answer": "D",
        },
    ],
    "PEA": [
        {
            "id": 0,
            "videos": [f"assembly/as{k}.mp4" for k in range(1, 4)],
            "begin": [1.5, 0, 2],
            "end": [6.2, 5, 7.9],
            "question": "Which video attaches the cabin at the wrong position?",
            "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. None of them"],
            "answer": "B",
        },
        {
            "id": 1,
            "videos": [f"assembly/as{k}.mp4" for k in (3, 1, 2)],
            "begin": [0, 1, 3],
            "end": [4, 7, 8],
            "question": "What kind of mistake happens in Video 1?",
            "options": [
                "A. wrong order",
                "B. previous one is mistake",
                "C. shouldn't have happened",
                "D. wrong position",
            ],
            "answer": "C",
        },
    ],
    "PI": [
        {
            "id": 0,
            "video": "movie/mv5.mp4",
            "beginning": [0, 3],
            "ending": [9, 12],
            "options": [
                "A. The hero misses the train.",
                "B. The hero buys a ticket and boards the train.",
                "C. The train is cancelled.",
                "D. The hero goes home.",
            ],
            "answer": "B",
        },
        {
            "id": 1,
            "video": "movie/mv5.mp4",
            "beginning": [[0, 2], [3, 4.5]],
            "ending": [[8, 12]],
            "options": [
                "A. They argue and part ways.",
                "B. They meet for the first time.",
                "C. They celebrate a wedding.",
                "D. They solve the case together.",
            ],
            "answer": "D",
        },
    ],
    "FSA": [
        {"id": 0, "video A": "cook/ck1.mp4", "video B": "cook/ck2.mp4", "ref_segment": [1, 3], "answer": [2, 4.5]},
        {
            "id": 1,
            "video A": "cook/ck3.mp4",
            "video B": "cook/ck4.mp4",
            "ref_segment": [0.5, 2.0],
            "answer": [3.25, 5.5],
        },
    ],
    "PSS": [
        {
            "id": 0,
            "video": "cook/ck5.mp4",
            "segments": {"clip_a": [[6, 9]], "clip_b": [[0, 3]], "clip_c": [[9, 12]], "clip_d": [[3, 6]]},
            "answer": "2->4->1->3",
        },
        {
            "id": 1,
            "video": "cook/ck5.mp4",
            "segments": {"1": [[0, 2], [2.5, 4]], "2": [[8, 12]], "3": [[4, 8]]},
            "answer": "1->3->2",
        },
    ],
    "MSR": [
        # {A2} appears only in an option (the official script reads placeholders from the question only)
        {
            "id": 0,
            "vid": 7,
            "objects": [{"id": 3}, {"id": 5}],
            "question": "In view B, which object is closer to {B1}?",
            "options": ["A. {A2}", "B. {B2}", "C. Neither of them", "D. Both are equally close"],
            "answer": "B",
        },
        {
            "id": 1,
            "vid": 7,
            "objects": [{"id": 5}, {"id": 3}],
            "question": "On which side of {A2} is {A1} in view A?",
            "options": ["A. Left", "B. Right", "C. Above", "D. Below"],
            "answer": "A",
        },
    ],
    "MOC": [
        {
            "id": 0,
            "vid": 9,
            "objects": [{"id": 1}, {"id": 2}],
            "question": "How many vehicles appear in both views, counting {A1} and {B2}?",
            "options": ["A. 1", "B. 2", "C. 3", "D. 4"],
            "answer": "C",
        },
        # track 4 is annotated only after the frames the folder holds: not visible in the sampled frames
        {
            "id": 1,
            "vid": 9,
            "objects": [{"id": 4}, {"id": 1}],
            "question": "Counting {A1} and {B2}, how many cars cross the junction?",
            "options": ["A. 2", "B. 3", "C. 4", "D. 5"],
            "answer": "A",
        },
    ],
    "CCQA": [
        {
            "id": 0,
            "video A": "cook/ck3.mp4",
            "video B": "cook/ck4.mp4",
            "question": "How does the way the onion is cut differ between the two videos?",
            "answer": "In Video A the onion is diced finely, while in Video B it is sliced into thick rings.",
            "scoring_points": ["Video A dices the onion finely", "Video B slices the onion into thick rings"],
        },
        {
            "id": 1,
            "video A": "cook/ck1.mp4",
            "video B": "cook/ck2.mp4",
            "question": "Compare how long the pasta is boiled and how it is drained.",
            "answer": "Video A boils the pasta for 8 minutes and drains it in a colander; Video B boils it for 10 minutes "
            "and lifts it out with tongs.",
            "scoring_points": [
                "Video A boils the pasta for 8 minutes",
                "Video A drains the pasta in a colander",
                "Video B boils the pasta for 10 minutes and lifts it out with tongs",
            ],
        },
    ],
}
_CROSSVID_TRACKS = {  # (view, vid) -> [(track id, {frame position: box or None})]
    (1, 7): [
        (3, {"0": None, "2": _crossvid_box(0, 0), "3": _crossvid_box(4, 1)}),
        (5, {"0": _crossvid_box(200, 30.7), "1": _crossvid_box(205, 31)}),
    ],
    (2, 7): [
        (3, {"1": _crossvid_box(100, 50), "4": _crossvid_box(110, 52)}),
        (5, {"0": _crossvid_box(150.9, 99.99)}),
        (8, {"5": _crossvid_box(10, 10)}),
    ],
    (1, 9): [(1, {"1": _crossvid_box(20, 20)}), (2, {"0": _crossvid_box(0, 150)}), (4, {"40": _crossvid_box(5, 5)})],
    (2, 9): [(1, {"3": _crossvid_box(300, 150)}), (2, {"2": _crossvid_box(250, 0)})],
}


def make_crossvid(folder: Path) -> None:
    import json

    from lmms_eval_plugins.synthetic import make_frame_folder, make_video

    for rel, (seconds, seed) in _CROSSVID_VIDEOS.items():
        make_video(folder / "videos" / rel, seconds=seconds, fps=4, width=96, height=72, seed=seed)
    for (view, vid), tracks in _CROSSVID_TRACKS.items():
        make_frame_folder(
            folder / "uav" / "frames" / str(view) / f"{vid}-{view}",
            num_frames=6,
            width=400,
            height=300,
            start_number=1,
            seed=50 + 10 * view + vid,
        )
        records = [{"id": track, "bbox": boxes} for track, boxes in tracks]
        path = folder / "uav" / "bbox" / str(view) / f"{vid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(records, indent=1) + "\n")
    (folder / "QA").mkdir(parents=True, exist_ok=True)
    for task, records in _CROSSVID_QA.items():
        write_atomic(folder / "QA" / f"{task}.json", json.dumps(records, indent=1, ensure_ascii=False) + "\n")
