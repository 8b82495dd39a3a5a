"""The trace contract's version, in a module of its own: a manifest can name it without loading pyarrow."""

SCHEMA_VERSION = "2.7"  # 2.1: bytes_written, bytes_unknown_time_share; 2.2: join_method;
# 2.3: communication columns on kernels, the overlap and collectives tables; 2.4: roof, compute_roof,
# memory_roof, roof_note, working_set_bytes (the roof each kernel is placed against, and why);
# 2.5: timing_spread, timing_spread_of, noisy (how far a point's repeated timing samples spread);
# 2.6: op_input_dims_source (tensor-list shapes recovered from the backward's gradients);
# 2.7: transfer on ops (the kinds of copy an op ran: a host-link transfer is told from a device copy)
