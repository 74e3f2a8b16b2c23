"""CSR matrices from parts that are already valid, without scipy's per-call validation.

A simulated point states its policy's objective about 8,000 times on problems of a few
dozen jobs; scipy's constructor re-scans the index arrays of every small matrix it
builds, which measured 15 % of the warm solve path. `csr` is for parts the caller built
itself (int32 indices sorted within rows, indptr of length rows + 1). Whether assembling
a matrix from its parts gives what scipy's constructor gives is checked once, at import;
if scipy's internals ever differ, `csr` is the public constructor.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _assemble(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    m = sp.csr_matrix.__new__(sp.csr_matrix)
    m._shape, m.data, m.indices, m.indptr, m.maxprint = shape, data, indices, indptr, 50
    return m


def _checked(data, indices, indptr, shape) -> sp.csr_matrix:
    return sp.csr_matrix((data, indices, indptr), shape=shape)


def _assembly_works() -> bool:
    parts = (np.array([1.0, 2.0, 3.0]), np.array([0, 2, 1], np.int32), np.array([0, 2, 3], np.int32), (2, 3))
    try:
        fast, ref = _assemble(*parts), _checked(*parts)
        x = np.array([1.0, 10.0, 100.0])
        return (np.array_equal(fast @ x, ref @ x) and np.array_equal((fast * 2.0).toarray(), (ref * 2.0).toarray())
                and np.array_equal(fast.T @ np.ones(2), ref.T @ np.ones(2)) and (fast != ref).nnz == 0)
    except Exception:   # any scipy whose internals differ: build matrices the public way
        return False


csr = _assemble if _assembly_works() else _checked
