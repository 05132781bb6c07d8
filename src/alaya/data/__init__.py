"""The dataset side of alaya: the clip contract, clip files, dataset folders, validation,
inspection and importers.

Modules: ``contract`` (keys, dtypes, shapes), ``clipio`` (``write_clip``, ``read_clip``,
``check_invariants``), ``dataset`` (``DatasetMeta``, ``ClipDataset``, splits), ``validate``
(``validate_dataset``), ``inspect`` (summaries, contact sheets, GIFs), ``importer``
(``import_gbuffers``), ``geometry`` (back-projection, normals from depth, reprojected flow),
``synthetic`` (a tiny analytic clip for tests).
"""

from alaya.data.clipio import ClipError, check_invariants, read_clip, write_clip
from alaya.data.dataset import ClipDataset, DatasetMeta, read_meta, split_for_seed, write_meta

__all__ = [
    "ClipDataset", "ClipError", "DatasetMeta", "check_invariants", "read_clip", "read_meta",
    "split_for_seed", "write_clip", "write_meta",
]
