"""`wlprof run gnn`: GNN neighbourhood aggregation, backend by backend, on generated graphs.

Registered on `wlprof.cli.run.app` (wrapped in `handle_errors` there):

    wlprof run gnn --graph rmat --scale 20 --features 64,128,256
    wlprof run gnn --graph uniform,rmat,zipf:1.5 --backend scatter,index_add,segment,csr
    wlprof run gnn --graph rmat --backend pyg:gcn,pyg:sage,pyg:gat
    wlprof run gnn --graph karate
"""

from __future__ import annotations

from typing import Annotated

import typer

from wlprof.cli.common import DEFAULT_OUT
from wlprof.cli.run import Device, Dtype, Out, Quiet, Reps, Resume, Steps, Warmup, _go


def gnn(
    graph: Annotated[str | None, typer.Option(
        "--graph", help="uniform, rmat (Graph500 Kronecker), zipf:S (destination hubs), karate; "
        "comma-separated to sweep. Default: rmat")] = None,
    scale: Annotated[str | None, typer.Option(
        "--scale", help="log2 of the node count, e.g. 16,20 (GPU 20, CPU 12); karate ignores it")] = None,
    edge_factor: Annotated[int | None, typer.Option(
        "--edge-factor", help="Edges drawn per node (Graph500: 16), before duplicates and self-loops go")] = None,
    features: Annotated[str | None, typer.Option(
        "--features", help="Feature widths, e.g. 64,128,256 (GPU 128, CPU 32)")] = None,
    backend: Annotated[str | None, typer.Option(
        "--backend", help="scatter, index_add, segment, csr, pyg:gcn, pyg:sage, pyg:gat and their CSR "
        "variants pyg:gcn-csr, pyg:sage-csr, pyg:gat-csr. Default: scatter,index_add,segment,csr")] = None,
    reduction: Annotated[str | None, typer.Option(
        "--reduction", help="sum (default), mean, max (scatter, segment, pyg:sage)")] = None,
    transform: Annotated[bool, typer.Option(
        "--transform/--no-transform", help="Raw backends: a Linear(F, F) after the aggregation "
        "(gnn/transform). PyG layers always run theirs")] = False,
    seed: Annotated[int | None, typer.Option(
        "--seed", help="Seed of the graph draw and node features (default 0; layer weights keep seed 0)")] = None,
    device: Device = None, dtype: Dtype = None, out: Out = DEFAULT_OUT, steps: Steps = 5, warmup: Warmup = 5,
    reps: Reps = 30, quiet: Quiet = False, resume: Resume = None,
) -> None:
    """GNN aggregation: graph x features x backend x reduction, with the aggregation costed from the graph."""
    _go("gnn", {"graph": graph, "scale": scale, "edge_factor": edge_factor, "features": features,
                "backend": backend, "reduction": reduction, "transform": transform,
                "seed": seed},
        device, dtype, out, steps, warmup, reps, quiet, resume)
