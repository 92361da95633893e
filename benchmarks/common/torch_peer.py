"""Shared plumbing of the suite's PyTorch peer scripts (gloo, CPU, one process per rank).

Used by benchmarks/scaling/ddp-yardstick and benchmarks/exchange/gloo-allreduce,
which put this directory on sys.path (relative to their own real path) and
import this module before numpy, h5py or anything else that loads BLAS:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
        os.path.realpath(__file__))), "common"))
    import torch_peer   # raises ImportError when torch is missing

Importing it sets OPENBLAS_NUM_THREADS=1 when unset (ranks share few cores,
and BLAS reads the variable when it loads) and imports torch.

Environment (Open MPI's mpirun and benchmarks/scaling/netlab.sh export it):
  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE  rank and K (unset: rank 0 of 1)
  QSGD_NETLAB_MASTER  rank 0's address for the gloo rendezvous (else 127.0.0.1)
  QSGD_NETLAB_IFACE   the interface gloo uses, GLOO_SOCKET_IFNAME (else lo)
  QSGD_NETLAB_RATE    the emulated link rate, recorded as link_rate (else "local")
"""
import datetime
import json
import os
import socket

import qsgd_report  # noqa: E402  (this directory is on sys.path: see above)

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch (or numpy) loads BLAS

import torch  # noqa: E402  (after the BLAS default)
import torch.distributed as dist  # noqa: E402

INIT_TIMEOUT = datetime.timedelta(minutes=10)


def rank_and_size():
    """(rank, K) from Open MPI's environment; (0, 1) outside mpirun."""
    return (int(os.environ.get("OMPI_COMM_WORLD_RANK", "0")),
            int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))


def master_address():
    return os.environ.get("QSGD_NETLAB_MASTER") or "127.0.0.1"


def socket_interface():
    return os.environ.get("QSGD_NETLAB_IFACE") or "lo"


def init_process_group(port):
    """Joins the gloo process group (TCP rendezvous at master_address():port); returns (rank, K)."""
    rank, size = rank_and_size()
    os.environ["GLOO_SOCKET_IFNAME"] = socket_interface()
    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (master_address(), port), rank=rank,
                            world_size=size, timeout=INIT_TIMEOUT)
    return rank, size


def max_over_ranks(values):
    """Maximum over ranks (collective, float64) of a number, or element-wise of a list of numbers."""
    scalar = isinstance(values, (int, float))
    t = torch.tensor([values] if scalar else list(values), dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t[0]) if scalar else t.tolist()


def gather_hosts():
    """Every rank's host name, in rank order (collective)."""
    hosts = [None] * dist.get_world_size()
    dist.all_gather_object(hosts, socket.gethostname())
    return hosts


def gather_host_cpus(hosts):
    """Per host, the CPUs its ranks may run on together: the union of their
    affinity masks, as a JSON object {host: count} (collective)."""
    masks = [None] * dist.get_world_size()
    dist.all_gather_object(masks, sorted(os.sched_getaffinity(0)))
    out = {}
    for h in hosts:
        out[h] = len(set().union(*(set(m) for m, x in zip(masks, hosts) if x == h)))
    return json.dumps(out)


def link_rate():
    return os.environ.get("QSGD_NETLAB_RATE") or "local"


def peer_version():
    return "torch " + torch.__version__


utc_now = qsgd_report.utc_now


def cpu_flags():
    """The first 'flags' line of /proc/cpuinfo ("" when unreadable)."""
    return qsgd_report.cpu_model_and_flags()[1]


def openblas_threads():
    """OPENBLAS_NUM_THREADS as the ranks run with it (this module's default: "1")."""
    return os.environ.get("OPENBLAS_NUM_THREADS", "")
