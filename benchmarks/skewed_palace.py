"""A palace shaped like the ones people run: skewed wings and rooms, files of a few chunks, rooms about
a few topics. The drawers of the scale benchmarks, generated the same on every run.

- 50 topics (cluster centres in 384 dimensions) of unequal weight (Zipf-like);
- 8 wings, one holding half the drawers, the smallest 2 %; each wing has 5 rooms of falling size and
  3 rooms of about 50 drawers (the small rooms real palaces are full of);
- files of 3-11 chunks (7 on average); a room's files are mostly (80 %) about its 3 own topics;
- within a topic, texts differ along a few directions (a file is a point there, its chunks near it),
  so that neighbours are graded as in a corpus of real text;
- files are written in a random order, as palaces grow by many mines and conversations.

Queries come from drawers (a drawer's vector plus noise) and are filtered to the wing, or the wing and
room, of their nearest drawer: a search for something the palace holds, narrowed to where it is.

    palace = SkewedPalace(100_000)
    ids, docs, metas, vecs = palace.batch(0, 1000)     # any batch on its own, deterministic
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

DIM = 384
TOPICS = 50
WING_SHARES = (0.50, 0.14, 0.10, 0.08, 0.07, 0.05, 0.04, 0.02)
ROOM_SHARES = (0.40, 0.25, 0.18, 0.12, 0.05)  # of a wing's drawers, beside its small rooms
SMALL_ROOMS = 3
SMALL_ROOM_DRAWERS = 50
OWN_TOPICS = 3
OWN_TOPIC_SHARE = 0.8
MIN_CHUNKS, MAX_CHUNKS = 3, 11
SEED = 20261203
BLOCK = 1000  # vectors are drawn a block at a time, so any range of drawers comes out the same
LATENT = 8  # directions along which a topic's texts differ
TOPIC_SPREAD = 0.6  # how far a text lies from its topic's centre along them
CHUNK_STEP = 0.35  # how far a chunk lies from its file's place
NOISE = 0.15  # and in every other direction
WORDS = [f"w{i}" for i in range(4000)]


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


class SkewedPalace:
    """``n`` drawers: where each one lies (wing, room, file, topic) is fixed at construction; its vector,
    text and metadata are made on demand by :meth:`batch`."""

    def __init__(self, n: int, seed: int = SEED):
        self.n, self.seed = n, seed
        rng = np.random.default_rng(seed)
        self.centers = _unit(rng.normal(size=(TOPICS, DIM))).astype(np.float32)
        weights = 1.0 / np.arange(1, TOPICS + 1) ** 0.8
        self.topic_weights = weights / weights.sum()
        # rooms: (wing, room, drawers wanted)
        small = SMALL_ROOMS * SMALL_ROOM_DRAWERS
        rooms = []
        for w, share in enumerate(WING_SHARES):
            in_wing = max(0, int(round(n * share)) - small)
            rooms += [(w, r, int(round(in_wing * s))) for r, s in enumerate(ROOM_SHARES)]
            rooms += [(w, len(ROOM_SHARES) + r, SMALL_ROOM_DRAWERS) for r in range(SMALL_ROOMS)]
        # files: each room's, of MIN..MAX chunks, about one of the room's own topics (or any topic)
        files = []  # (wing, room, topic, chunks)
        for w, r, want in rooms:
            own = rng.choice(TOPICS, OWN_TOPICS, replace=False, p=self.topic_weights)
            while want > 0:
                chunks = int(min(want, rng.integers(MIN_CHUNKS, MAX_CHUNKS + 1)))
                if rng.random() < OWN_TOPIC_SHARE:
                    topic = int(rng.choice(own))
                else:
                    topic = int(rng.choice(TOPICS, p=self.topic_weights))
                files.append((w, r, topic, chunks))
                want -= chunks
        # Within a topic, texts differ along a few directions (embeddings of real text have a low
        # intrinsic dimension): a file is a point in its topic's LATENT-dimensional subspace, so that
        # neighbours are graded, as a real corpus's are, rather than all equally far.
        self.topic_basis = np.stack(
            [np.linalg.qr(rng.normal(size=(DIM, LATENT)))[0].T for _ in range(TOPICS)]
        ).astype(np.float32)
        self.file_place = rng.normal(size=(len(files), LATENT)).astype(np.float32)
        order = rng.permutation(len(files))
        wing, room, topic, file_no, chunk = [], [], [], [], []
        for f in order:
            w, r, t, c = files[f]
            wing += [w] * c
            room += [r] * c
            topic += [t] * c
            file_no += [int(f)] * c
            chunk += list(range(c))
        # the room sizes are rounded: trim or pad with the last file's kind to exactly n
        while len(wing) < n:
            wing.append(wing[-1]), room.append(room[-1]), topic.append(topic[-1])
            file_no.append(file_no[-1]), chunk.append(chunk[-1] + 1)
        self.wing = np.array(wing[:n], dtype=np.int16)
        self.room = np.array(room[:n], dtype=np.int16)
        self.topic = np.array(topic[:n], dtype=np.int16)
        self.file_no = np.array(file_no[:n], dtype=np.int32)
        self.chunk = np.array(chunk[:n], dtype=np.int16)

    # -- drawers -------------------------------------------------------------------------------------
    def vectors(self, start: int, count: int) -> np.ndarray:
        """The unit vectors of drawers start..start+count (the same however the range is cut)."""
        first, last = start // BLOCK, (start + count - 1) // BLOCK
        blocks = [self._block(b) for b in range(first, last + 1)] if count > 0 else [np.zeros((0, DIM))]
        return np.concatenate(blocks)[start - first * BLOCK :][:count]

    def _block(self, b: int) -> np.ndarray:
        sl = slice(b * BLOCK, min(self.n, (b + 1) * BLOCK))
        count = sl.stop - sl.start
        rng = np.random.default_rng((self.seed, 2, b))
        # where in its topic the chunk lies: its file's place plus a step of its own
        u = self.file_place[self.file_no[sl]] + CHUNK_STEP * rng.normal(size=(count, LATENT)).astype(
            np.float32
        )
        spread = np.einsum("nl,nld->nd", u, self.topic_basis[self.topic[sl]])
        noise = _unit(rng.normal(size=(count, DIM))).astype(np.float32)
        v = self.centers[self.topic[sl]] + TOPIC_SPREAD * spread + NOISE * noise
        return _unit(v).astype(np.float32)

    def batch(self, start: int, count: int):
        """(ids, documents, metadatas, vectors) of drawers start..start+count, as ``mempalace mine``
        writes them."""
        count = max(0, min(count, self.n - start))
        vecs = self.vectors(start, count)
        first = start // BLOCK
        words = np.concatenate(
            [
                np.random.default_rng((self.seed, 3, b)).integers(0, len(WORDS), (BLOCK, 60))
                for b in range(first, (start + count - 1) // BLOCK + 1)
            ]
            or [np.zeros((0, 60), dtype=int)]
        )[start - first * BLOCK :]
        base = datetime(2025, 1, 1)
        ids, docs, metas = [], [], []
        for j in range(count):
            i = start + j
            wing, room = self.wing_name(i), self.room_name(i)
            ids.append(f"drawer_{wing}_{room}_{i:08d}")
            docs.append(f"topic{self.topic[i]} " + " ".join(WORDS[k] for k in words[j]))
            metas.append(
                {
                    "wing": wing,
                    "room": room,
                    "source_file": f"/home/user/projects/{wing}/{room}/file_{self.file_no[i]}.md",
                    "chunk_index": int(self.chunk[i]),
                    "added_by": "miner",
                    "normalize_version": 2,
                    "filed_at": (base + timedelta(seconds=i)).isoformat(),
                    "source_mtime": 1735689600.0 + int(self.file_no[i]),
                }
            )
        return ids, docs, metas, vecs

    def wing_name(self, i: int) -> str:
        return f"wing_{int(self.wing[i])}"

    def room_name(self, i: int) -> str:
        return f"room_{int(self.room[i])}"

    def all_vectors(self, chunk: int = 20 * BLOCK) -> np.ndarray:
        return np.concatenate([self.vectors(s, min(chunk, self.n - s)) for s in range(0, self.n, chunk)])

    # -- queries -------------------------------------------------------------------------------------
    def queries(self, count: int, matrix: np.ndarray, k: int = 10, seed: int = 7) -> list[dict]:
        """``count`` queries, each with its filters and the exact top ``k`` ids (cosine) under each:
        ``{"vector", "filters": {"unfiltered": (where, truth_ids), "wing": ..., "wing_room": ...}}``."""
        rng = np.random.default_rng((self.seed, 4, seed))
        out = []
        for src in rng.integers(0, self.n, count):
            q = _unit(matrix[src] + 0.01 * rng.normal(size=DIM).astype(np.float32)).astype(np.float32)
            sims = matrix @ q
            near = int(np.argmax(sims))
            w, r = int(self.wing[near]), int(self.room[near])
            masks = {
                "unfiltered": (None, np.ones(self.n, dtype=bool)),
                "wing": ({"wing": f"wing_{w}"}, self.wing == w),
                "wing_room": (
                    {"$and": [{"wing": f"wing_{w}"}, {"room": f"room_{r}"}]},
                    (self.wing == w) & (self.room == r),
                ),
            }
            filters = {}
            for name, (where, mask) in masks.items():
                idx = np.flatnonzero(mask)
                top = idx[np.argsort(-sims[idx], kind="stable")[:k]]
                filters[name] = (where, [self.drawer_id(int(i)) for i in top], int(mask.sum()))
            out.append({"vector": q, "filters": filters})
        return out

    def drawer_id(self, i: int) -> str:
        return f"drawer_{self.wing_name(i)}_{self.room_name(i)}_{i:08d}"
