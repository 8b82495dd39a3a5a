"""The GNN workload's graph generators: exact sizes, seeded, O(E), and the degree shapes they promise.

Degree statistics are checked on fixed seeds against what each model predicts
(bounds, not exact draws, so a change in torch's RNG stream does not break them):
uniform G(n, m) in-degrees are Binomial(m, 1/n), about Poisson(16) at edge factor
16; RMAT (Graph500 initiator) is heavy-tailed; zipf:s sends 1/H(n, s) of the
edges to its top destination.
"""

from __future__ import annotations

import pytest
import torch

from wlprof.workloads.gnn import graphs

CPU = torch.device("cpu")
SCALE = 12
N = 1 << SCALE  # 4096 nodes
M = 16 * N  # Graph500 edge factor 16: 65536 edges


def _check_edge_list(ei: torch.Tensor, n: int, m: int) -> None:
    assert ei.shape == (2, m)
    assert ei.dtype == torch.int64
    assert int(ei.min()) >= 0 and int(ei.max()) < n


@pytest.mark.parametrize("make", [
    lambda seed: graphs.uniform(N, M, CPU, seed),
    lambda seed: graphs.rmat(SCALE, M, CPU, seed),
    lambda seed: graphs.zipf(N, M, 1.5, CPU, seed),
], ids=["uniform", "rmat", "zipf"])
def test_exact_edge_count_and_seeded(make):
    a, b, c = make(0), make(0), make(1)
    _check_edge_list(a, N, M)
    assert torch.equal(a, b)  # same seed, same graph
    assert not torch.equal(a, c)


@pytest.mark.parametrize("make", [
    lambda: graphs.uniform(1 << 20, 4096, CPU),
    lambda: graphs.rmat(20, 4096, CPU),
    lambda: graphs.zipf(1 << 20, 4096, 1.5, CPU),
], ids=["uniform", "rmat", "zipf"])
def test_no_quadratic_structure(make):
    # 2^20 nodes: anything n x n would need 2^40 elements (8 TiB of int64) and fail; O(n + E) is
    # a permutation or a CDF of 2^20 entries and 4096 edges
    _check_edge_list(make(), 1 << 20, 4096)


def test_scale_16_graph500_size():
    # the size the issue calls "quick": 2^16 nodes, 16 * 2^16 = 1,048,576 edges
    ei = graphs.rmat(16, 16 << 16, CPU)
    _check_edge_list(ei, 1 << 16, 1 << 20)


def test_uniform_is_near_poisson():
    deg = graphs.in_degree(graphs.uniform(N, M, CPU), N).double()
    # Binomial(65536, 1/4096): mean 16, variance 16 * (1 - 1/4096) ~ 16
    assert float(deg.mean()) == 16.0
    assert 13.0 < float(deg.var()) < 19.0
    # the largest of 4096 Poisson(16) draws sits near 30: no hubs
    assert int(deg.max()) < 45
    assert int((deg == 0).sum()) == 0  # P(0) = e^-16 per node


def test_rmat_is_skewed_and_uniform_is_not():
    u = graphs.degree_stats(graphs.uniform(N, M, CPU), N)
    r = graphs.degree_stats(graphs.rmat(SCALE, M, CPU), N)
    assert u.mean_in_degree == r.mean_in_degree == 16.0
    assert r.max_in_degree > 20 * u.max_in_degree  # about 2400 against about 33 on seed 0
    assert r.isolated_share > 0.1  # Kronecker graphs leave many vertices without edges (18 % here)
    assert u.isolated_share == 0.0


def test_rmat_bits_follow_the_graph500_initiator():
    # Without the label permutation, each bit level of (source, destination) is one quadrant
    # draw: P(row 0, col 0) = A = 0.57, P(row bit 1) = C + D = 0.24, P(col bit 1) = B + D = 0.24.
    ei = graphs.rmat(SCALE, M, CPU, permute=False)
    src, dst = ei[0], ei[1]
    for level in (0, 5, SCALE - 1):
        r = (src >> level) & 1
        c = (dst >> level) & 1
        assert abs(float(((r == 0) & (c == 0)).double().mean()) - 0.57) < 0.01
        assert abs(float(r.double().mean()) - 0.24) < 0.01
        assert abs(float(c.double().mean()) - 0.24) < 0.01
        assert abs(float(((r == 1) & (c == 1)).double().mean()) - 0.05) < 0.01


def test_zipf_has_destination_hubs():
    ei = graphs.zipf(N, M, 1.5, CPU)
    deg = graphs.in_degree(ei, N)
    # top rank's share is 1 / H(4096, 1.5) = 1 / sum_k k^-1.5 = 0.387
    assert abs(int(deg.max()) / M - 0.387) < 0.02
    src_deg = torch.bincount(ei[0], minlength=N)
    assert int(src_deg.max()) < 45  # sources stay uniform
    # zipf:0 is uniform over destinations
    flat = graphs.degree_stats(graphs.zipf(N, M, 0.0, CPU), N)
    assert flat.max_in_degree < 45
    # once duplicates go, the hub is bounded by its n - 1 possible distinct sources, and reaches it
    simple = graphs.degree_stats(graphs.simplify(ei, N), N)
    assert N - 1 - 50 <= simple.max_in_degree <= N - 1


def test_simplify_removes_duplicates_and_self_loops_in_coalesced_order():
    ei = torch.tensor([[3, 0, 2, 0, 1, 0],
                       [0, 1, 2, 1, 0, 3]])
    # (0,1) twice -> once; (2,2) is a self-loop; sorted by source then destination
    assert graphs.simplify(ei, 4).tolist() == [[0, 0, 1, 3], [1, 3, 0, 0]]


def test_degree_stats_by_hand():
    # 5 nodes, edges 0->1, 0->2, 1->2, 3->2, 2->0; node 4 has no edge
    ei = torch.tensor([[0, 0, 1, 3, 2], [1, 2, 2, 2, 0]])
    st = graphs.degree_stats(ei, 5)
    assert (st.nodes, st.edges, st.max_in_degree) == (5, 5, 3)  # node 2 receives 3
    assert st.mean_in_degree == 1.0  # 5 edges / 5 nodes
    assert st.isolated_share == 0.2  # node 4 only
    assert st.zero_in_share == 0.4  # nodes 3 and 4 receive nothing


def test_karate_offline():
    ei, n = graphs.karate(CPU)
    st = graphs.degree_stats(ei, n)
    assert (st.nodes, st.edges) == (34, 156)
    assert st.max_in_degree == 17  # the club's instructor/administrator hub
    assert torch.equal(graphs.simplify(ei, n), ei)  # simple and coalesced already


def test_bad_generator_arguments():
    with pytest.raises(ValueError):
        graphs.zipf(N, M, -1.0, CPU)
    with pytest.raises(ValueError):
        graphs.rmat(SCALE, M, CPU, a=0.6, b=0.3, c=0.2)  # a + b + c >= 1
