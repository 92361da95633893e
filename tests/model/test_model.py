#!/usr/bin/python3
"""Tests of qsgd-model (benchmarks/model): its formulas on cases computed by
hand, the calibration's recovery of a known alpha and beta, and the
validation command on the committed data set.

usage: test_model.py REPO [TEST ...]"""
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import unittest

REPO = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(REPO, "benchmarks", "model"))
sys.path.insert(0, os.path.join(REPO, "benchmarks", "common"))
import qsgd_model as qm  # noqa: E402


def qsgd_report_module():
    import qsgd_report
    return qsgd_report

MiB = 1 << 20


def stub_rates(gbps=4.0, bits=None):
    """Every kernel at `gbps` GB/s of fp32 input: t = 4n / (gbps 1e9)."""
    names = ["memcpy/kokkos"] + ["encode/%s" % c for c in ("fixed", "rans", "bf16")] + \
            ["decode_accumulate/%s" % c for c in ("fixed", "rans", "fp32", "bf16")] + \
            ["decode/%s" % c for c in ("fixed", "rans")]
    return qm.Rates({k: gbps * 1e9 for k in names}, bits or {"fixed": 6.0, "rans": 4.5, "fp32": 32.0, "bf16": 16.0})


def psgd_rates(cols=100):
    """stub_rates, and PowerSGD's kernels at r = 4, measured on a matrix of `cols` columns: each at its own
    rate, which depends on the size (GB/s of M at 10^5 and 10^6 elements)."""
    r = stub_rates()
    for k, (small, large) in {"project": (2e9, 3e9), "orthonormalize": (20e9, 40e9), "back": (1.5e9, 2.5e9),
                              "expand": (1e9, 1.2e9)}.items():
        r.bps["powersgd_%s/r4" % k] = {100000: small, 1000000: large}
    r.matrix_cols = cols
    return r


class Formulas(unittest.TestCase):
    def test_link_time_is_alpha_per_message_plus_beta_per_byte(self):
        self.assertAlmostEqual(qm.Link(2e-6, 1e-9).time(3, 1000), 3 * 2e-6 + 1000e-9, places=15)

    def test_a_link_needs_a_per_byte_cost(self):
        with self.assertRaises(qm.ModelError):
            qm.Link(0.0, 0.0)
        with self.assertRaises(qm.ModelError):
            qm.Link(-1e-6, 1e-9)

    def test_a_byte_costs_the_wire_or_the_shared_host_stack_whichever_is_slower(self):
        link = qm.Link(0.0, 1e-9, 0.6e-9)
        self.assertEqual(link.per_byte(1.0), 1e-9)
        self.assertAlmostEqual(link.per_byte(2.0), 1.2e-9, places=18)
        self.assertEqual((link.bound(1.0), link.bound(2.0)), ("wire", "host stack"))

    def test_a_burst_after_idle_saves_wire_time_only(self):
        link = qm.Link(0.0, 1e-8, 1e-9, burst=1000)
        self.assertAlmostEqual(link.time(1, 5000, after_idle=True), 4000 * 1e-8, places=15)
        self.assertAlmostEqual(link.time(1, 5000), 5000 * 1e-8, places=15)
        # Within the burst the host stack still copies every byte.
        self.assertAlmostEqual(link.time(1, 800, after_idle=True), 800 * 1e-9, places=15)

    def test_share_factor(self):
        self.assertEqual(qm.share_factor(4, 2), 2.0)
        self.assertEqual(qm.share_factor(3, 2), 1.5)
        self.assertEqual(qm.share_factor(2, 8), 1.0)

    def test_ring_allreduce_by_hand(self):
        # n = 2^20 floats, K = 4: blocks of 1 MiB (one 4 MiB segment each), 2(K-1) = 6 messages,
        # 2(K-1)/K x 4 MiB = 6 MiB per rank; the additions (3/4 of n) and the scaling (n) are
        # streaming passes at the memcpy rate, 4 GB/s: 2^20 ns per pass of n.
        n = 1 << 20
        p = qm.exchange("allreduce", "fp32", n, 4, qm.Link(1e-5, 1e-9), stub_rates(), cores=4)
        self.assertEqual(p.wire_bytes, 6 * MiB)
        self.assertAlmostEqual(p.network, 6 * 1e-5 + 6 * MiB * 1e-9, places=12)
        self.assertAlmostEqual(p.cpu, 1.75 * n * 1e-9, places=12)
        self.assertAlmostEqual(p.total, 6e-5 + 6 * MiB * 1e-9 + 1.75 * n * 1e-9, places=12)
        self.assertAlmostEqual(p.after, n * 1e-9, places=12)

    def test_ring_allreduce_segments_count_messages(self):
        # 64 MiB of floats at K = 2: blocks of 32 MiB = 8 segments of 4 MiB, 2 steps -> 16 messages.
        n = 16 * MiB
        p = qm.exchange("allreduce", "fp32", n, 2, qm.Link(1.0, 1e-12), stub_rates(1e9), cores=2)
        self.assertAlmostEqual(p.network, 16 * 1.0 + 64 * MiB * 1e-12, places=9)

    def test_allreduce16_halves_the_bytes_and_adds_the_conversion(self):
        n = 1 << 20
        p = qm.exchange("allreduce16", "bf16", n, 2, qm.Link(0.0, 1e-9), stub_rates(), cores=2)
        self.assertEqual(p.wire_bytes, 2 * n)
        # To 16 bits, half the additions, back to 32 bits: 2.5 passes.
        self.assertAlmostEqual(p.cpu, 2.5 * n * 1e-9, places=12)

    def test_paced_share_is_the_ranks_of_the_fullest_core(self):
        self.assertEqual(qm.paced_share(3, 2), 2.0)
        self.assertEqual(qm.paced_share(4, 2), 2.0)
        self.assertEqual(qm.paced_share(5, 2), 3.0)
        self.assertEqual(qm.paced_share(2, 8), 1.0)

    def test_a_lockstep_exchange_runs_at_the_pace_of_a_shared_core(self):
        """Three ranks on two cores: a benchmark's back-to-back exchange
        (paced) runs its kernels at half a core, an exchange inside a step at
        the cores' average, two thirds of a core."""
        n = 1 << 20
        link = qm.Link(0.0, 1e-9)
        alone = qm.exchange("scatter-reduce", "fixed", n, 3, link, stub_rates(), cores=3)
        paced = qm.exchange("scatter-reduce", "fixed", n, 3, link, stub_rates(), cores=2, paced=True)
        spread = qm.exchange("scatter-reduce", "fixed", n, 3, link, stub_rates(), cores=2)
        self.assertAlmostEqual(paced.cpu, 2.0 * alone.cpu, places=12)
        self.assertAlmostEqual(spread.cpu, 1.5 * alone.cpu, places=12)

    def test_cores_shared_by_more_ranks_slow_the_kernels(self):
        n = 1 << 20
        link = qm.Link(0.0, 1e-9)
        alone = qm.exchange("scatter-reduce", "fixed", n, 4, link, stub_rates(), cores=4)
        shared = qm.exchange("scatter-reduce", "fixed", n, 4, link, stub_rates(), cores=2)
        self.assertAlmostEqual(shared.cpu, 2 * alone.cpu, places=12)
        self.assertAlmostEqual(shared.network, alone.network, places=12)

    def test_allgather_forwarding_waits_for_slice_decoding(self):
        # K = 4, 16 Mi floats = 16 pieces: the network path holds each piece at K - 2 = 2
        # forwarding ranks for one slice's decoding, and decodes the last slice.
        n = 16 << 20
        rates = stub_rates(bits={"fixed": 8.0})
        p = qm.exchange("allgather", "fixed", n, 4, qm.Link(0.0, 1e-6), rates, cores=4)
        enc, dec = n * 1e-9, 4 * n * 1e-9
        net = 3 * (n + 15 * 32 + 32) * 1e-6
        self.assertAlmostEqual(p.total, enc / 16 + net + 3 * dec / 16, places=9)

    def test_allgather_is_bound_by_the_slower_of_network_and_kernels(self):
        n = 1 << 20   # 4 MiB of fp32: one piece
        rates = stub_rates(bits={"fixed": 8.0})
        m = n + 32    # 8 bits per dimension + the frame's metadata
        # Slow link: the network path (first piece's encoding, K - 1 messages, last slice's decoding) bounds it.
        slow = qm.exchange("allgather", "fixed", n, 2, qm.Link(0.0, 1e-6), rates, cores=2)
        self.assertEqual(slow.wire_bytes, m)
        cpu = n * 1e-9 + 2 * n * 1e-9   # encode n, then K = 2 decode-accumulates of n
        self.assertAlmostEqual(slow.cpu, cpu, places=12)
        self.assertAlmostEqual(slow.total, cpu + m * 1e-6, places=12)
        # Fast link with 16 pieces: the kernels bound it.
        n16 = 16 * n
        fast = qm.exchange("allgather", "fixed", n16, 2, qm.Link(0.0, 1e-12), rates, cores=2)
        self.assertAlmostEqual(fast.total, 3 * n16 * 1e-9, places=12)

    def test_one_rank_exchanges_nothing(self):
        for s in qm.STRATEGIES:
            p = qm.exchange(s, "fixed", 1 << 20, 1, qm.Link(1e-5, 1e-9), psgd_rates(), cores=2,
                            matrices=[(1024, 1024)])
            self.assertEqual((p.total, p.wire_bytes), (0.0, 0), s)

    def test_powersgd_by_hand(self):
        # One matrix it compresses (1000 x 600), one it averages exactly (10 x 10: 100 elements
        # < 2 r (rows + cols) = 160) and 5,000 elements of vectors: the rest is 5,100 elements.
        # Copies at 4 GB/s, PowerSGD's kernels each at its own rate at the matrix's size (600,000
        # elements), orthonormalization at the benchmark matrix's with 1,000 rows (100 columns wide).
        n, r = 600000 + 100 + 5000, 4
        rates = psgd_rates()
        c = lambda e: 4.0 * e / 4e9  # noqa: E731
        kern = {k: 4.0 * 600000 / rates.rate("powersgd_%s/r4" % k, 600000) for k in ("project", "back", "expand")}
        orth = 4.0 * 100000 / rates.rate("powersgd_orthonormalize/r4", 100000)
        self.assertEqual(rates.rate("powersgd_orthonormalize/r4", 100000), 20e9)  # a measured size: no interpolation
        p_len, q_len = 1000 * r + 5100, 600 * r
        ring_p, ring_q = 2.0 * 0.5 * 4 * p_len, 2.0 * 0.5 * 4 * q_len   # 2(K-1)/K x 4 bytes, K = 2
        for feedback in (False, True):
            p = qm.exchange("powersgd", "fp32", n, 2, qm.Link(0.0, 1e-9), rates, cores=4,
                            matrices=[(1000, 600), (10, 10)], rank=r, feedback=feedback)
            before = kern["project"] + c(5100) + (c(n) if feedback else 0.0)         # P = M Q; the rest in
            middle = c(p_len) + c(5100) + orth + kern["back"]                        # ring 1's 1/K; rest out;
            after = c(q_len) + kern["expand"] + c(q_len) + (c(600000) if feedback else 0.0)  # orthonormalize, Q
            inside = 0.5 * c(p_len) + 0.5 * c(q_len)                               # the rings' additions
            self.assertEqual(p.wire_bytes, ring_p + ring_q)
            self.assertAlmostEqual(p.before, before, places=15)
            self.assertAlmostEqual(p.after, after, places=15)
            self.assertAlmostEqual(p.inside, inside, places=15)
            self.assertAlmostEqual(p.network, (ring_p + ring_q) * 1e-9, places=15)
            self.assertAlmostEqual(p.total, (ring_p + ring_q) * 1e-9 + before + middle + after + inside, places=15)
            self.assertEqual(len(p.segments), 2)
            self.assertAlmostEqual(p.segments[0][0], 0.0)
            self.assertAlmostEqual(p.segments[0][1], ring_p * 1e-9 + 0.5 * c(p_len), places=15)
            self.assertAlmostEqual(p.segments[1][0], middle, places=15)
            self.assertAlmostEqual(p.segments[1][1], ring_q * 1e-9 + 0.5 * c(q_len), places=15)

    def test_powersgd_without_shapes_or_rates_is_an_error(self):
        with self.assertRaisesRegex(qm.ModelError, "powersgd needs the shapes"):
            qm.exchange("powersgd", "fp32", 1 << 20, 2, qm.Link(0, 1e-9), psgd_rates(), cores=2)
        with self.assertRaisesRegex(qm.ModelError, "no rate for kernel 'powersgd_project/r4'"):
            qm.exchange("powersgd", "fp32", 1 << 20, 2, qm.Link(0, 1e-9), stub_rates(), cores=2,
                        matrices=[(1024, 1024)])
        shapeless = psgd_rates(cols=None)
        with self.assertRaisesRegex(qm.ModelError, "without the matrix shape they ran on"):
            qm.exchange("powersgd", "fp32", 1 << 20, 2, qm.Link(0, 1e-9), shapeless, cores=2, matrices=[(1024, 1024)])
        with self.assertRaisesRegex(qm.ModelError, "matrices of 1048576 elements in a bucket of 1000"):
            qm.exchange("powersgd", "fp32", 1000, 2, qm.Link(0, 1e-9), psgd_rates(), cores=2,
                        matrices=[(1024, 1024)])

    def test_unknown_strategy_and_missing_kernel_are_errors(self):
        with self.assertRaisesRegex(qm.ModelError, "unknown strategy 'ring'"):
            qm.exchange("ring", "fixed", 10, 2, qm.Link(0, 1e-9), stub_rates(), cores=2)
        with self.assertRaisesRegex(qm.ModelError, "no rate for kernel 'encode/elias-dense'"):
            qm.exchange("allgather", "elias-dense", 10, 2, qm.Link(0, 1e-9), stub_rates(bits={"elias-dense": 6}), cores=2)

    def test_a_rate_measured_at_several_sizes_is_taken_at_the_unit_size(self):
        r = qm.Rates({"encode/rans": {1 << 20: 4e9, 1 << 22: 2e9}}, {"rans": 4.5})
        self.assertEqual(r.rate("encode/rans", 1 << 20), 4e9)
        self.assertEqual(r.rate("encode/rans", 1 << 22), 2e9)
        self.assertAlmostEqual(r.rate("encode/rans", 1 << 21), 3e9, places=3)  # halfway in log n
        self.assertEqual(r.rate("encode/rans", 1000), 4e9)       # held outside the sizes measured
        self.assertEqual(r.rate("encode/rans", 1 << 30), 2e9)
        self.assertAlmostEqual(r.seconds("encode/rans", 1 << 22, 1 << 20), 4.0 * (1 << 22) / 4e9, places=15)
        self.assertAlmostEqual(r.seconds("encode/rans", 1 << 22), 4.0 * (1 << 22) / 2e9, places=15)

    def test_rates_of_several_sizes_come_from_the_kernel_benchmark(self):
        doc = {"context": {"qsgd_s": 16}, "benchmarks": [
            {"run_name": "encode/rans/%d/manual_time" % n, "run_type": "aggregate", "aggregate_name": a,
             "repetitions": 3, "bytes_per_second": v * (2 if a == "mean" else 1), "bits_per_dim": 4.5}
            for n, v in ((1 << 20, 4e9), (1 << 22, 2e9)) for a in ("median", "mean")]}
        r = qm.Rates.from_kernels_json(doc)
        self.assertEqual(r.bps["encode/rans"], {1 << 20: 4e9, 1 << 22: 2e9})
        self.assertEqual(r.bits_per_dim("rans"), 4.5)

    def test_allgather_codes_at_the_rate_of_its_pieces_and_scatter_reduce_of_its_chunks(self):
        # Rates that halve from 1M to 4M elements: allgather's 1M-element pieces
        # run at the 1M rate, scatter-reduce's chunks of n / K at theirs.
        fast, slow = 8e9, 4e9
        names = ["encode/rans", "decode_accumulate/rans", "decode/rans", "decode_accumulate/fixed"]
        sized = qm.Rates({k: {1 << 20: fast, 1 << 22: slow} for k in names}, {"rans": 4.5})
        flat_fast = qm.Rates({k: fast for k in names}, {"rans": 4.5})
        link = qm.Link(0.0, 1e-9)
        n = 1 << 22
        self.assertAlmostEqual(qm.allgather(n, 2, link, sized, 1.0, "rans").cpu,
                               qm.allgather(n, 2, link, flat_fast, 1.0, "rans").cpu, places=12)
        k4 = qm.scatter_reduce(n, 4, link, sized, 1.0, "rans")  # chunks of 1M
        self.assertAlmostEqual(k4.cpu, qm.scatter_reduce(n, 4, link, flat_fast, 1.0, "rans").cpu, places=12)
        k2 = qm.scatter_reduce(n, 2, link, sized, 1.0, "rans")  # chunks of 2M: between the two rates
        self.assertGreater(k2.cpu, qm.scatter_reduce(n, 2, link, flat_fast, 1.0, "rans").cpu)
        self.assertLess(k2.cpu, qm.scatter_reduce(n, 2, link, qm.Rates({k: slow for k in names}, {"rans": 4.5}),
                                                  1.0, "rans").cpu)


class Steps(unittest.TestCase):
    COMPUTE = qm.Compute(forward=0.010, backward=0.020, update=0.001, other=0.0)

    def step(self, buckets, strategy="allreduce", link=None):
        return qm.step_time(buckets, self.COMPUTE, 2, link or qm.Link(0.0, 1e-9), stub_rates(), cores=4,
                            strategy=strategy, codec="fixed", compute_scale=1.0)

    def test_a_transfer_that_ends_before_backward_is_hidden(self):
        # 2^20 floats, fp32 ring at K = 2: 4 MiB on the wire (4.194 ms at 1 ns/B) plus half a pass
        # of additions while the ring runs; the 1/K scaling (one pass, 1.049 ms) after the wait.
        # Ready half-way through backward (t = 20 ms), done at 24.7 ms: hidden behind backward.
        # The ring's additions still take the rank's cores while backward runs: the step is the
        # compute, half a pass of additions and the scaling.
        total, parts = self.step([qm.Bucket(1 << 20, False, 0.5)])
        self.assertAlmostEqual(parts["exposed_s"], 0.0, places=12)
        self.assertTrue(parts["cpu_bound"])
        self.assertAlmostEqual(total, 0.010 + 0.020 + 1.5 * (1 << 20) * 1e-9 + 0.001, places=12)

    def test_a_transfer_that_starts_at_the_end_of_backward_is_exposed(self):
        total, parts = self.step([qm.Bucket(1 << 20, False, 1.0)])
        ring = 4 * MiB * 1e-9 + 0.5 * (1 << 20) * 1e-9
        self.assertAlmostEqual(parts["exposed_s"], ring, places=12)
        self.assertAlmostEqual(total, 0.030 + ring + (1 << 20) * 1e-9 + 0.001, places=12)

    def test_buckets_share_the_link_one_after_the_other(self):
        one, _ = self.step([qm.Bucket(1 << 20, False, 1.0)])
        two, parts = self.step([qm.Bucket(1 << 20, False, 1.0), qm.Bucket(1 << 20, False, 1.0)])
        ring = 4 * MiB * 1e-9 + 0.5 * (1 << 20) * 1e-9
        # The first bucket's scaling runs while the second is on the wire.
        self.assertAlmostEqual(parts["exposed_s"], 2 * ring - (1 << 20) * 1e-9, places=12)
        self.assertAlmostEqual(two - one, ring, places=12)

    def test_a_later_phase_waits_for_a_call_from_the_caller(self):
        # Scatter-reduce's accumulation and requantization run only inside a call into the
        # exchange: with no hook after stage 1 ends, they and stage 2 wait for backward's end.
        slow = qm.Link(0.0, 1e-8)
        alone, a = self.step([qm.Bucket(1 << 18, True, 0.0)], "scatter-reduce", slow)
        # A second (tiny, dense) bucket's hook late in backward lets stage 2 start there.
        hooked, h = self.step([qm.Bucket(1 << 18, True, 0.0), qm.Bucket(16, False, 0.95)], "scatter-reduce", slow)
        self.assertGreater(a["exposed_s"], 0.0)
        self.assertLess(h["exposed_s"], a["exposed_s"])
        self.assertLess(hooked, alone)

    def test_the_cores_bound_a_step_whose_network_is_the_host_stack(self):
        # An unshaped link (no wire limit) with a slow stack: every byte is CPU on the rank's cores.
        stack = qm.Link(0.0, 0.0, 1e-8)
        total, parts = self.step([qm.Bucket(1 << 20, False, 0.0)], link=stack)
        # Compute, the ring's additions (half a pass) and scaling (a pass), the stack's copies.
        cpu = 0.031 + 1.5 * (1 << 20) * 1e-9 + 4 * MiB * 1e-8
        self.assertTrue(parts["cpu_bound"])
        self.assertAlmostEqual(total, cpu, places=12)


class Replay(unittest.TestCase):
    """The model of a replayed step: the Bucketer's plan of a description's
    tensors, compute that sleeps (a GPU's) or spins, replay's gradient writes."""
    COMPUTE = qm.Compute(forward=0.010, backward=0.020, update=0.001, other=0.0)

    def test_plan_follows_the_bucketer_by_hand(self):
        # Cap 2^21 floats (8 MiB). Tensors in backward order: a small one goes to the
        # dense bucket open at the time, a large one joins the open compressed bucket
        # unless that would take it past the cap; a tensor above the cap is alone.
        sizes = [100, 600000, 500000, 50, (1 << 21) + 7, 300000, 20, 10000]
        plan = qm.plan_buckets(sizes, fusion_bytes=8 << 20, layer_filter=10000, align=512)
        pad = lambda n: (n + 511) // 512 * 512  # noqa: E731
        self.assertEqual(plan, [(170, False, [0, 3, 6]),
                                (pad(600000) + pad(500000), True, [1, 2]),
                                (pad((1 << 21) + 7), True, [4]),
                                (pad(300000) + pad(10000), True, [5, 7])])

    def test_plan_without_quantization_pads_nothing(self):
        plan = qm.plan_buckets([600000, 500000], fusion_bytes=8 << 20, align=1)
        self.assertEqual(plan, [(1100000, True, [0, 1])])

    def description(self):
        return qm.Description({"format": "qsgd-model-description", "version": 1, "model": "toy", "batch": 8,
                               "times": {"source": "flops", "device": "cuda", "forward_s": 0.01, "backward_s": 0.02,
                                         "optimizer_s": 0.001, "data_s": 0.0, "flops_rate": 1e12},
                               "tensors": [{"name": "a", "shape": [10], "ready_s": 0.001},
                                           {"name": "b", "shape": [1000, 600], "ready_s": 0.004},
                                           {"name": "c", "shape": [500000], "ready_s": 0.010},
                                           {"name": "d", "shape": [20], "ready_s": 0.019}]}, "toy.json")

    def test_a_bucket_is_ready_with_its_last_tensor(self):
        d = self.description()
        self.assertEqual(d.compute, "sleep")
        self.assertEqual(d.parameters(), 10 + 600000 + 500000 + 20)
        b = d.buckets(fusion_bytes=8 << 20, align=512)
        self.assertEqual([(x.elements, x.compressed, x.tensors) for x in b],
                         [(30, False, 2), (600064 + 500224, True, 2)])
        self.assertAlmostEqual(b[0].ready, 0.019 / 0.02)
        self.assertAlmostEqual(b[1].ready, 0.010 / 0.02)
        # The matrices PowerSGD may compress: tensors of two or more dimensions, shape[0] rows.
        self.assertEqual([x.matrices for x in b], [[], [(1000, 600)]])
        conv = qm.Description({"format": "qsgd-model-description", "model": "conv", "batch": 1,
                               "times": {"forward_s": 0.01, "backward_s": 0.02, "optimizer_s": 0.0},
                               "tensors": [{"name": "w", "shape": [64, 3, 7, 7], "ready_s": 0.01}]}, "conv.json")
        self.assertEqual(conv.buckets()[0].matrices, [(64, 147)])

    def test_a_description_without_its_fields_is_named(self):
        with self.assertRaisesRegex(qm.ModelError, "bad.json: not a qsgd-model-description"):
            qm.Description({"format": "x"}, "bad.json")
        with self.assertRaisesRegex(qm.ModelError, "bad.json: a field is missing"):
            qm.Description({"format": "qsgd-model-description", "model": "m", "batch": 1, "times": {}}, "bad.json")

    def step(self, buckets, sleep, fill=False, link=None, strategy="allgather"):
        return qm.step_time(buckets, self.COMPUTE, 2, link or qm.Link(0.0, 1e-9), stub_rates(), cores=4,
                            strategy=strategy, codec="fixed", sleep=sleep, fill=fill)

    def test_error_feedback_costs_its_passes_and_the_fusion_copies(self):
        # One compressed bucket of one tensor: without feedback it is exchanged in place; with
        # it the residual is pushed (a copy in, a copy out) and s += g (1.5 passes) before, s -= sent
        # and g *= c (2.5 passes) after, each at the memcpy rate of the rank's share (K = 2, 4 cores: 1).
        b = [qm.Bucket(1 << 20, True, 0.5, 1, [(1024, 1024)])]
        copy = 4.0 * (1 << 20) / 4e9

        def step(feedback):
            return qm.step_time(b, self.COMPUTE, 2, qm.Link(0.0, 1e-9), psgd_rates(), cores=4, strategy="powersgd",
                                codec="fp32", sleep=True, feedback=feedback)
        t0, plain = step(False)
        t1, fed = step(True)
        self.assertEqual((plain["feedback_s"], plain["copies_s"]), (0.0, 0.0))
        self.assertAlmostEqual(fed["feedback_s"], 4.0 * copy, places=15)
        self.assertAlmostEqual(fed["copies_s"], 2.0 * copy, places=15)
        # Before the push: s += g, the copy in, PowerSGD's copy of what it sends, its projection.
        self.assertAlmostEqual(fed["hooks_s"] - plain["hooks_s"], 1.5 * copy + copy + copy, places=15)
        # The hooks, from the bucket's readiness halfway through backward, end before the GPU's
        # backward does, so only the work after the wait lengthens the step: PowerSGD's copy of the
        # matrices as sent, the copy out, s -= sent and g *= c.
        self.assertLess(fed["hooks_s"], 0.5 * self.COMPUTE.backward)
        self.assertAlmostEqual(t1 - t0, copy + copy + 2.5 * copy, places=12)

    def test_hooks_delay_compute_on_the_cores_but_not_a_gpus(self):
        # Encoding 2^20 elements at 4 GB/s takes 1.049 ms in the hook: on the cores backward is that
        # much longer; sleeping, backward (a GPU's) goes on beside it.
        b = [qm.Bucket(1 << 20, True, 0.25)]
        _, cpu = self.step(b, sleep=False)
        _, gpu = self.step(b, sleep=True)
        enc = 4.0 * (1 << 20) / 4e9
        self.assertAlmostEqual(cpu["hooks_s"], enc, places=12)
        self.assertAlmostEqual(gpu["hooks_s"], enc, places=12)
        # Both end backward's compute at 30 ms; only the cores' step carries the hook in it.
        total_cpu, _ = self.step(b, sleep=False)
        total_gpu, _ = self.step(b, sleep=True)
        self.assertAlmostEqual(total_cpu - total_gpu, enc, places=12)

    def test_compute_that_sleeps_is_not_the_cores_work(self):
        # An unshaped link with a slow stack: on the cores the step is bound by compute plus the
        # stack's copies; sleeping, the compute is not the cores' and the timeline decides.
        stack = qm.Link(0.0, 0.0, 1e-8)
        b = [qm.Bucket(1 << 20, False, 0.0)]
        total_cpu, cpu = self.step(b, sleep=False, link=stack)
        total_gpu, gpu = self.step(b, sleep=True, link=stack)
        self.assertTrue(cpu["cpu_bound"])
        self.assertFalse(gpu["cpu_bound"])
        self.assertLess(total_gpu, total_cpu)

    def test_gradient_writes_hold_back_a_hook_only_when_longer_than_backward_before_it(self):
        # Replay zeroes the gradients before forward and writes each bucket's gradients before its
        # hook: a memcpy pass each, 1.049 ms for 2^20 floats at 4 GB/s. The zeroing always adds to
        # the step; the writes of a bucket ready 10 ms into backward fit before it, those of a
        # bucket ready at once delay its hook, and with it a transfer that is exposed anyway.
        pass_s = 4.0 * (1 << 20) / 4e9
        late = [qm.Bucket(1 << 20, True, 0.5)]
        t0, _ = self.step(late, sleep=True)
        t1, p1 = self.step(late, sleep=True, fill=True)
        self.assertAlmostEqual(p1["fill_s"], pass_s, places=12)
        self.assertAlmostEqual(p1["zero_s"], pass_s, places=12)
        self.assertAlmostEqual(t1 - t0, pass_s, places=12)
        early = [qm.Bucket(1 << 20, True, 0.0)]
        slow = qm.Link(0.0, 1e-7)  # 4.5 MB at 10 MB/s: exposed however it starts
        e0, _ = self.step(early, sleep=True, link=slow)
        e1, _ = self.step(early, sleep=True, fill=True, link=slow)
        self.assertAlmostEqual(e1 - e0, 2 * pass_s, places=9)

    def test_a_step_that_streams_its_gradient_codes_at_the_rate_out_of_cache(self):
        # Rates measured at 2^20 (in cache) and 2^24 (out of it): a step over 2^24 elements in
        # buckets of 2^20 codes at the 2^24 rate when it streams, at the 2^20 rate otherwise.
        fast, slow = 8e9, 2e9
        names = ["memcpy/kokkos", "encode/fixed", "decode_accumulate/fixed", "decode/fixed"]
        rates = qm.Rates({k: {1 << 20: fast, 1 << 24: slow} for k in names}, {"fixed": 6.0})
        buckets = [qm.Bucket(1 << 20, True, 1.0) for _ in range(16)]
        link = qm.Link(0.0, 1e-12)
        _, cached = qm.step_time(buckets, self.COMPUTE, 2, link, rates, 4, "allgather", "fixed", sleep=True)
        _, streamed = qm.step_time(buckets, self.COMPUTE, 2, link, rates, 4, "allgather", "fixed", sleep=True,
                                   stream=True)
        self.assertAlmostEqual(streamed["coding_s"] / cached["coding_s"], fast / slow, places=9)

    def test_a_fused_bucket_is_copied_in_and_out(self):
        one = [qm.Bucket(1 << 20, True, 1.0, tensors=1)]
        two = [qm.Bucket(1 << 20, True, 1.0, tensors=2)]
        t1, _ = self.step(one, sleep=True)
        t2, p2 = self.step(two, sleep=True)
        copy = 4.0 * (1 << 20) / 4e9
        self.assertAlmostEqual(p2["copies_s"], 2 * copy, places=12)
        self.assertAlmostEqual(t2 - t1, 2 * copy, places=9)

    def test_a_step_bound_by_the_stack_waits_for_the_copies_backward_could_not_hold(self):
        # 2^20 floats through the fp32 ring at K = 2 on a link whose only cost is the stack
        # (1e-8 s per byte), ready half-way through backward (t = 20 ms). By hand: its 4 MiB take
        # net = 41.9 ms of stack CPU plus half a pass of additions; the part of the stack's copies
        # before backward's end (30 ms) lengthens backward; the rank then waits for the rest of
        # the transfer. The cores bound the step (compute, the ring's passes, every byte's copy),
        # and the part of that surplus that is the stack's copies of bytes moved after backward
        # is time waited too.
        link = qm.Link(0.0, 0.0, 1e-8)
        copy = 4.0 * (1 << 20) / 4e9
        net = 4.0 * (1 << 20) * 1e-8
        seg = net + 0.5 * copy
        start, end = 0.020, 0.020 + seg
        in_backward = (0.030 - start) / seg * net
        waited = end - (0.030 + in_backward)
        timeline = end + copy + 0.001
        cpu = 0.031 + 1.5 * copy + net
        total, parts = self.step([qm.Bucket(1 << 20, False, 0.5)], sleep=False, link=link)
        self.assertTrue(parts["cpu_bound"])
        self.assertAlmostEqual(parts["timeline_s"], timeline, places=12)
        self.assertAlmostEqual(total, cpu, places=12)
        self.assertAlmostEqual(parts["exposed_s"], waited + min(cpu - timeline, net - in_backward), places=12)
        # Sleeping, the surplus is the host's own work: nothing is added to the waits.
        _, slept = self.step([qm.Bucket(1 << 20, False, 0.5)], sleep=True, link=link)
        self.assertLess(slept["exposed_s"], parts["exposed_s"])


class Signs(unittest.TestCase):
    def test_a_sign_agrees_only_when_every_round_is_on_the_predicted_side(self):
        self.assertEqual(qm.sign_verdict(1.20, [1.15, 1.30, 1.02]), "agrees")
        self.assertEqual(qm.sign_verdict(1.20, [1.15, 1.30, 1.005]), "within noise")
        self.assertEqual(qm.sign_verdict(1.20, [0.97, 1.00]), "differs")

    def test_a_sign_that_does_not_pay_agrees_at_or_below_one_percent(self):
        self.assertEqual(qm.sign_verdict(1.00, [0.95, 1.01, 0.99]), "agrees")
        self.assertEqual(qm.sign_verdict(1.005, [1.02, 0.98]), "within noise")
        self.assertEqual(qm.sign_verdict(0.90, [1.05, 1.02]), "differs")

    def test_no_measurement_is_an_error(self):
        with self.assertRaises(ValueError):
            qm.sign_verdict(1.2, [])


class Calibration(unittest.TestCase):
    SIZES = [1 << e for e in range(14, 25, 2)]   # 16 Ki .. 16 Mi floats

    def synthetic(self, link, noise=0.0, seed=1):
        rates, rng = stub_rates(), random.Random(seed)
        rows = []
        for n in self.SIZES:
            t = qm.exchange("allreduce", "fp32", n, 2, link, rates, cores=2).total
            rows.append((n, 2, t * (1.0 + rng.uniform(-noise, noise))))
        return rows, rates

    def test_recovers_alpha_and_the_host_stack_exactly_from_exact_times(self):
        rows, rates = self.synthetic(qm.Link(25e-6, 0.0, 1 / 1.25e9))
        link = qm.fit_host(rows, rates, cores=2)
        self.assertAlmostEqual(link.alpha / 25e-6, 1.0, places=6)
        self.assertAlmostEqual(link.gamma * 1.25e9, 1.0, places=6)
        self.assertEqual(link.beta, 0.0)

    def test_recovers_them_within_noise(self):
        rows, rates = self.synthetic(qm.Link(50e-6, 0.0, 1 / 1.25e9), noise=0.02, seed=7)
        link = qm.fit_host(rows, rates, cores=2)
        self.assertLess(abs(link.gamma * 1.25e9 - 1.0), 0.05)
        self.assertLess(abs(link.alpha / 50e-6 - 1.0), 0.25)

    def test_recovers_the_wire_of_a_shaped_link_ignoring_rows_within_its_burst(self):
        host = qm.Link(25e-6, 0.0, 1 / 1.25e9)
        rows, rates = self.synthetic(qm.Link(25e-6, 1 / 1.25e8, host.gamma))
        burst = 1 << 20
        # Rows moving under 4 x the burst per rank left faster than the rate.
        rows = [(n, k, t * 0.3 if 4 * n < 4 * burst else t) for n, k, t in rows]
        link, used = qm.fit_wire(rows, rates, 2, host, burst, "1gbit")
        self.assertEqual(used, sum(1 for n in self.SIZES if 4 * n >= 4 * burst))
        self.assertAlmostEqual(link.beta * 1.25e8, 1.0, places=6)
        self.assertEqual((link.alpha, link.gamma, link.burst), (host.alpha, host.gamma, burst))

    def test_a_link_measured_only_within_its_burst_cannot_be_fitted(self):
        host = qm.Link(25e-6, 0.0, 1e-9)
        rows, rates = self.synthetic(qm.Link(25e-6, 1e-8, 1e-9))
        with self.assertRaisesRegex(qm.ModelError, "4 x the"):
            qm.fit_wire(rows, rates, 2, host, 1 << 30, "1gbit")

    def test_negative_alpha_is_clamped_and_gamma_refitted(self):
        rows, rates = self.synthetic(qm.Link(0.0, 0.0, 1e-9))
        rows[0] = (rows[0][0], 2, rows[0][2] * 0.5)   # the smallest size, faster than any latency allows
        link = qm.fit_host(rows, rates, cores=2)
        self.assertEqual(link.alpha, 0.0)
        self.assertGreater(link.gamma, 0.0)

    def test_one_size_cannot_be_fitted(self):
        rows, rates = self.synthetic(qm.Link(1e-5, 0.0, 1e-9))
        with self.assertRaisesRegex(qm.ModelError, "at least two"):
            qm.fit_host(rows[:1], rates, cores=2)


class Projection(unittest.TestCase):
    PARAMS = os.path.join(REPO, "benchmarks", "model", "params", "h200-cluster.json")

    def params(self):
        with open(self.PARAMS) as f:
            return json.load(f)

    def test_every_value_of_the_parameter_file_names_its_source(self):
        p = self.params()
        for key, entry in p.items():
            if isinstance(entry, dict):
                self.assertTrue(entry.get("source"), key)
                self.assertRegex(entry["source"], r"^(measured|vendor|assumed|the )", key)
        del p["hbm_GBps"]["source"]
        with self.assertRaisesRegex(qm.ModelError, "'hbm_GBps' needs a value and a source"):
            qm.Cluster(p)

    def test_the_measured_bits_are_those_of_the_committed_codec_report(self):
        with open(os.path.join(REPO, "results", "reference", "codecs", "report.json")) as f:
            rows = json.load(f)["rows"]
        bits = qm.param(self.params(), "bits_per_dim")
        for b, s in (("2", 4), ("4", 16), ("8", 256)):
            row = next(r for r in rows if r["input"] == "gaussian" and r["codec"] == "fixed" and r["s"] == s)
            self.assertAlmostEqual(bits[b], row["bits_per_dim"], delta=1e-3)

    def test_a_ring_inside_a_node_runs_on_nvlink_and_across_nodes_on_the_nic(self):
        c = qm.Cluster(self.params())
        self.assertEqual(c.link(8, 1).name, "NVLink")
        self.assertAlmostEqual(c.link(16, 100).beta, 8.0 / 100e9, places=20)

    def test_compression_pays_below_the_break_even_rate_and_not_above(self):
        c = qm.Cluster(self.params())
        n, b, k = 100_000_000, 32, 64
        w = c.workload(n, b)
        be = qm.break_even(c, w, k, "scatter-reduce", "fixed", "4", ("allreduce16", "bf16"))
        self.assertIsNotNone(be)
        self.assertGreater(be, 0.0)
        for g, pays in ((be / 2, True), (be * 2, False)):
            q = qm.project_step(c, w, k, g, "scatter-reduce", "fixed", "4")[0]
            ref = qm.project_step(c, w, k, g, "allreduce16", "bf16", None)[0]
            self.assertEqual(ref / q > 1.0 + qm.PAYS, pays, "at %g Gbit/s" % g)


def step_files(d):
    """The training traces of a measured set's first round (DIR/steps/round-1,
    or DIR/steps when it was measured once): {name: path}."""
    steps = os.path.join(d, "steps")
    first = os.path.join(steps, "round-1")
    top = first if os.path.isdir(first) else steps
    return {n: os.path.join(top, n) for n in os.listdir(top) if n.endswith(".h5")}


def all_traces(d):
    return sorted(os.path.relpath(os.path.join(r, n), d) for r, _, files in os.walk(d) for n in files
                  if n.endswith(".h5"))


def setUpModule():
    """The committed folders keep their traces in traces.tar.xz
    (results/reference/README.md): the tests read them as files."""
    import qsgd_report
    for d in ("model", "replay-models", "sweep", "tta"):
        qsgd_report.unpack_traces(os.path.join(REPO, "results", "reference", d))


def one_round_set(data, dst):
    """A copy of the measured set `data` in `dst` with its steps and compute
    of the first round only, as a set measured once (steps/, compute/); the
    archive of all rounds stays behind."""
    import shutil
    shutil.copytree(data, dst, ignore=shutil.ignore_patterns("steps", "compute", "traces.tar.xz"))
    for part in ("steps", "compute"):
        src = os.path.join(data, part)
        first = os.path.join(src, "round-1")
        shutil.copytree(first if os.path.isdir(first) else src, os.path.join(dst, part))
    return dst


class Command(unittest.TestCase):
    PROG = os.path.join(REPO, "benchmarks", "model", "qsgd-model")
    DATA = os.path.join(REPO, "results", "reference", "model")

    def run_model(self, *args):
        return subprocess.run(["/usr/bin/python3", self.PROG] + list(args), capture_output=True, text=True, timeout=120)

    def run_json(self, *args):
        """Runs qsgd-model with --json; its exit status must be 0. Returns (the run, the document)."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out.json")
            r = self.run_model(*(list(args) + ["--json", out]))
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                return r, json.load(f)

    def test_validate_judges_signs_measured_in_rounds(self):
        """--signs reads rounds of K = 4 runs: here the committed set's first
        round of K = 4 step traces copied as two identical rounds, judged
        against that round alone, so each sign's median and range equal the
        single measured speedup, and the verdict follows it."""
        import shutil
        with tempfile.TemporaryDirectory() as tmp:
            data = one_round_set(self.DATA, os.path.join(tmp, "set"))
            steps = step_files(data)
            for r in ("round-1", "round-2"):
                dst = os.path.join(tmp, "signs", r)
                os.makedirs(dst)
                for f, path in steps.items():
                    if "-K4-" in f and ("allreduce-fp32" in f or "-4bit" in f):
                        shutil.copy(path, dst)
            _, doc = self.run_json("validate", data, "--signs", tmp)
        even = {(b["model"], b["config"], x["rate"]): x for b in doc["break_even"] for x in b["at_measured_rates"]}
        self.assertEqual(len(doc["signs"]), len(even))
        for x in doc["signs"]:
            one = even[(x["model"], x["config"], x["rate"])]
            self.assertEqual(x["rounds"], 2)
            self.assertAlmostEqual(x["measured_min"], one["measured_speedup"], places=9)
            self.assertAlmostEqual(x["measured_max"], one["measured_speedup"], places=9)
            self.assertEqual(x["verdict"], "agrees" if one["agree"] else "differs")

    def test_validate_takes_the_median_of_rounds(self):
        """Three rounds of one measured set: the committed traces twice, and
        once with one configuration's step times doubled. Every row is
        predicted as from one round; the doubled configuration's measured
        time is the others' (the median), its spread 100%."""
        import shutil
        import h5py
        with tempfile.TemporaryDirectory() as tmp:
            base = one_round_set(self.DATA, os.path.join(tmp, "one"))
            one = self.run_json("validate", base)[1]
            d = os.path.join(tmp, "set")
            shutil.copytree(base, d, ignore=shutil.ignore_patterns("steps", "compute"))
            for part in ("steps", "compute"):
                for r in ("round-1", "round-2", "round-3"):
                    shutil.copytree(os.path.join(base, part), os.path.join(d, part, r))
            slow = next(n for n in sorted(step_files(base)) if "-K2-" in n)
            with h5py.File(os.path.join(d, "steps", "round-3", slow), "r+") as f:
                f["steps/step_time"][...] = 2.0 * f["steps/step_time"][...]
            doc = self.run_json("validate", d)[1]
        self.assertEqual(len(doc["steps"]), len(one["steps"]))
        doubled = 0
        for a, b in zip(one["steps"], doc["steps"]):
            self.assertEqual((a["model"], a["rate"], a["ranks"], a["strategy"], a["codec"]),
                             (b["model"], b["rate"], b["ranks"], b["strategy"], b["codec"]))
            self.assertEqual(b["rounds"], 3)
            self.assertAlmostEqual(b["predicted_s"], a["predicted_s"], places=12)
            self.assertAlmostEqual(b["measured_s"], a["measured_s"], places=12)
            if any(f.endswith(os.path.join("round-3", slow)) for f in b["files"]):
                doubled += 1
                self.assertAlmostEqual(b["spread"], 1.0, places=6)
                self.assertAlmostEqual(b["measured_runs_s"][-1], 2.0 * a["measured_s"], places=6)
            else:
                self.assertEqual(b["spread"], 0.0)
        self.assertEqual(doubled, 1)

    def test_validate_without_a_signs_directory_is_an_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = self.run_model("validate", self.DATA, "--signs", tmp)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no signs/ directory", r.stderr)

    def test_validate_predicts_every_committed_row(self):
        r, doc = self.run_json("validate", self.DATA)
        expected = 0
        for name in os.listdir(self.DATA):
            if name.startswith("val-") and name.endswith(".json"):
                with open(os.path.join(self.DATA, name)) as f:
                    expected += len(json.load(f)["rows"])
        self.assertGreater(expected, 0)
        self.assertEqual(len(doc["rows"]), expected)
        for row in doc["rows"]:
            self.assertGreater(row["predicted"]["total_s"], 0.0)
            self.assertAlmostEqual(row["error"], row["predicted"]["total_s"] / row["measured_s"] - 1.0, places=12)
        self.assertIn("median |error|", r.stdout)
        # Every training configuration with K > 1 is a step row, and its rounds' traces are
        # every trace with K > 1, each once.
        traces = [t for t in all_traces(self.DATA) if t.startswith("steps") and "-K1-" not in t]
        self.assertGreater(len(traces), 0)
        self.assertEqual(len(doc["steps"]), len([n for n in step_files(self.DATA) if "-K1-" not in n]))
        self.assertEqual(sorted(f for r in doc["steps"] for f in r["files"]), traces)
        for row in doc["steps"]:
            self.assertAlmostEqual(row["error"], row["predicted_s"] / row["measured_s"] - 1.0, places=12)
            self.assertGreater(row["ranks"], 1)
            self.assertEqual(row["rounds"], len(row["files"]))
            runs = row["measured_runs_s"]
            self.assertEqual(row["measured_s"], runs[len(runs) // 2] if len(runs) % 2 else
                             (runs[len(runs) // 2 - 1] + runs[len(runs) // 2]) / 2)
        # The break-even check: one entry per model and 4-bit strategy at the largest K, each
        # measured rate compared with the prediction of the same rows.
        self.assertEqual({(b["model"], b["config"]) for b in doc["break_even"]},
                         {(r["model"], "%s %s %s-bit" % (r["strategy"], r["codec"], r["bits"])) for r in doc["steps"]
                          if r["strategy"] in ("scatter-reduce", "allgather")})
        for b in doc["break_even"]:
            self.assertGreater(len(b["at_measured_rates"]), 0)
            for x in b["at_measured_rates"]:
                self.assertEqual(x["agree"], (x["measured_speedup"] > 1.01) == (x["predicted_speedup"] > 1.01))

    REPLAY = os.path.join(REPO, "results", "reference", "replay-models")

    def test_replay_predicts_every_replayed_run_but_powersgd(self):
        _, doc = self.run_json("replay", self.REPLAY)
        traces = [t for t in all_traces(self.REPLAY) if not t.startswith("calibration")]
        psgd = [t for t in traces if "powersgd" in t]
        self.assertGreater(len(psgd), 0)
        self.assertEqual(sorted(x["file"] for x in doc["skipped"]), sorted(psgd))
        self.assertEqual(sorted(r["file"] for r in doc["steps"]), sorted(t for t in traces if t not in psgd))
        for r in doc["steps"]:
            self.assertAlmostEqual(r["error"], r["predicted_s"] / r["measured_s"] - 1.0, places=12)
            self.assertEqual(r["within_spread"], abs(r["error"]) <= r["step_spread"])
            self.assertEqual(r["compute"], "sleep")  # the bundled descriptions are a GPU's
            self.assertGreater(r["predicted_parts"]["fill_s"], 0.0)
        self.assertEqual(doc["step_errors"]["rows"], len(doc["steps"]))

    def test_replay_predicts_powersgd_with_its_kernels_rates(self):
        # The committed runs (linked) and calibration beside a kernels-powersgd.json of PowerSGD's
        # kernels at 5 GB/s: every run is predicted, the others exactly as without the file, and the
        # results report's table gains PowerSGD's speedups.
        import shutil
        _, before = self.run_json("replay", self.REPLAY)
        tables = qsgd_report_module().load_script(os.path.join(REPO, "benchmarks", "report", "qsgd-tables"),
                                                  "qsgd_tables")
        self.assertNotIn("PowerSGD", tables.table_replay_models_model(self.REPLAY).splitlines()[0])
        with tempfile.TemporaryDirectory() as tmp:
            folder = os.path.join(tmp, "replay-models")
            os.mkdir(folder)
            for t in all_traces(self.REPLAY):
                if not t.startswith("calibration"):
                    os.symlink(os.path.abspath(os.path.join(self.REPLAY, t)), os.path.join(folder, t))
            cal = os.path.join(folder, "calibration")
            shutil.copytree(os.path.join(self.REPLAY, "calibration"), cal)
            rows = [{"name": "powersgd_%s/r4/%d/manual_time_median" % (k, n), "run_name":
                     "powersgd_%s/r4/%d/manual_time" % (k, n), "run_type": "aggregate", "aggregate_name": "median",
                     "repetitions": 3, "bytes_per_second": 5e9}
                    for k in ("project", "orthonormalize", "back", "expand") for n in (1 << 20, 1 << 24)]
            with open(os.path.join(cal, "kernels-powersgd.json"), "w") as f:
                json.dump({"context": {"qsgd_matrix_cols": "1024", "qsgd_powersgd_rank": "4"}, "benchmarks": rows}, f)
            _, doc = self.run_json("replay", folder)
            table = tables.table_replay_models_model(folder).splitlines()
        self.assertTrue(table[0].endswith("| PowerSGD r = 4 over fp32 ring: measured / predicted |"), table[0])
        ring = {(r["model"], r["rate"], r["ranks"]): r for r in doc["steps"] if r["strategy"] == "allreduce"}
        cells = set(line.split("|")[-2].strip() for line in table[2:] if line.startswith("| "))
        self.assertEqual(cells, {"%.2f / %.2f" % (ring[k]["measured_s"] / r["measured_s"],
                                                   ring[k]["predicted_s"] / r["predicted_s"])
                                 for r in doc["steps"] if r["strategy"] == "powersgd"
                                 for k in [(r["model"], r["rate"], r["ranks"])]})
        self.assertEqual(doc["skipped"], [])
        psgd = [r for r in doc["steps"] if r["strategy"] == "powersgd"]
        self.assertEqual(sorted(r["file"] for r in psgd), sorted(x["file"] for x in before["skipped"]))
        for r in psgd:
            parts = r["predicted_parts"]
            self.assertGreater(parts["feedback_s"], 0.0)   # the bundled runs use error feedback
            self.assertGreater(parts["coding_s"], 0.0)
            ring = next(x for x in doc["steps"] if x["strategy"] == "allreduce" and
                        (x["model"], x["rate"], x["ranks"]) == (r["model"], r["rate"], r["ranks"]))
            self.assertLess(parts["wire_bytes"], 0.1 * ring["predicted_parts"]["wire_bytes"])  # factors, not the gradient
        others = {r["file"]: r["predicted_s"] for r in doc["steps"] if r["strategy"] != "powersgd"}
        self.assertEqual(others, {r["file"]: r["predicted_s"] for r in before["steps"]})

    def test_calibrate_refuses_an_unknown_part_before_measuring(self):
        script = os.path.join(REPO, "benchmarks", "model", "calibrate.sh")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cal")
            r = subprocess.run(["bash", script, "--out", out, "--parts", "kernels,powersgd,kernel"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("--parts takes kernels, powersgd, fits and ceilings, got 'kernel'", r.stderr)
            self.assertFalse(os.path.exists(out))  # nothing measured, nothing written

    def test_replay_stops_when_the_bucketers_plan_is_not_the_models(self):
        import h5py
        src = os.path.join(self.REPLAY, "resnet50-1gbit-K2-allgather-fixed-4bit.h5")
        with tempfile.TemporaryDirectory() as tmp:
            dst = os.path.join(tmp, "resnet50-1gbit-K2-allgather-fixed-4bit.h5")
            with open(src, "rb") as f, open(dst, "wb") as g:
                g.write(f.read())
            with h5py.File(dst, "r+") as f:
                plan = json.loads(f.attrs["bucket_plan"])
                plan[1]["elements"] += 512
                f.attrs["bucket_plan"] = json.dumps(plan)
            r = self.run_model("replay", tmp, "--calibration", os.path.join(self.REPLAY, "calibration"))
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("plan_buckets no longer follows comm/src/bucketer.cpp", r.stderr)

    def test_replay_names_a_missing_calibration(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = self.run_model("replay", self.REPLAY, "--calibration", os.path.join(tmp, "none"))
            self.assertEqual(r.returncode, 2)
            self.assertIn("no calibration directory", r.stderr)

    def test_project_takes_described_models(self):
        files = [os.path.join(REPO, "benchmarks", "replay", "models", m + ".json") for m in ("resnet50", "bert-base")]
        r, doc = self.run_json("project", Projection.PARAMS, "--model-file", ",".join(files))
        self.assertEqual({x["model"] for x in doc["steps"]}, {"resnet50", "bert-base"})
        self.assertEqual(doc["model_files"], files)
        self.assertIn("rescaled to", doc["compute"]["resnet50"])  # derived from FLOPs at 400 TFLOP/s
        with open(files[0]) as f:
            n = sum(math.prod(t["shape"]) for t in json.load(f)["tensors"])
        self.assertEqual(next(x["parameters"] for x in doc["steps"] if x["model"] == "resnet50"), n)
        self.assertTrue(any(b["model"] == "bert-base" for b in doc["break_even"]))

    def test_validate_limits_set_the_exit_status(self):
        r = self.run_model("validate", self.DATA, "--max-error", "0")
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)

    def test_project_lists_every_model_and_its_assumptions(self):
        r, doc = self.run_json("project", Projection.PARAMS)
        with open(Projection.PARAMS) as f:
            params = json.load(f)
        self.assertEqual({x["model"] for x in doc["steps"]}, {m["name"] for m in params["models"]["value"]})
        self.assertIn("assumed:", r.stdout)
        self.assertIn("vendor:", r.stdout)

    def test_project_heatmap_draws_the_speedup_of_every_multi_node_cell(self):
        with tempfile.TemporaryDirectory() as tmp:
            png = os.path.join(tmp, "h.png")
            _, doc = self.run_json("project", Projection.PARAMS, "--heatmap", png)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        with open(Projection.PARAMS) as f:
            params = json.load(f)
        per_node = params["gpus_per_node"]["value"]
        gpus = [k for k in params["gpus"]["value"] if k > per_node]
        grids = doc["heatmap"]["grids"]
        self.assertEqual(set(grids), {m["name"] for m in params["models"]["value"]})
        for model, g in grids.items():
            self.assertEqual(g["gpus"], gpus)
            self.assertEqual(g["link_gbit"], sorted(params["link_gbit"]["value"]))
            for i, k in enumerate(g["gpus"]):
                for j, rate in enumerate(g["link_gbit"]):
                    c = next(r["configs"] for r in doc["steps"]
                             if r["model"] == model and r["gpus"] == k and r["link_gbit"] == rate)
                    self.assertAlmostEqual(g["speedup"][i][j],
                                           c["bf16 ring"]["step_s"] / c["scatter-reduce 4-bit"]["step_s"], places=12)

    def make_sweep(self, tmp, baselines):
        """A Slurm sweep directory from the committed set: the MLP's K = 1 fp32
        trace and its four K = 2 traces at 10 Gbit/s in traces/, and
        baselines/NAME as copies of the committed fit-RATE.json files."""
        import shutil
        steps = step_files(self.DATA)
        os.makedirs(os.path.join(tmp, "traces"))
        os.makedirs(os.path.join(tmp, "baselines"))
        names = ["mlp-local-K1-allreduce-fp32.h5"] + sorted(n for n in steps if n.startswith("mlp-10gbit-K2-"))
        for n in names:
            shutil.copy(steps[n], os.path.join(tmp, "traces", n))
        for name, rate in baselines.items():
            shutil.copy(os.path.join(self.DATA, "fit-%s.json" % rate), os.path.join(tmp, "baselines", name))
        return names[1:]

    def test_sweep_refits_each_allocation_on_its_newest_baseline_and_predicts_every_trace(self):
        with tempfile.TemporaryDirectory() as tmp:
            sweep = os.path.join(tmp, "sweep")
            # Job 5 of K = 2 (an earlier attempt, 1 Gbit/s rows) and job 7 (10 Gbit/s): job 7 must be the one fitted.
            k2 = self.make_sweep(sweep, {"K2-job5.json": "1gbit", "K2-job7.json": "10gbit"})
            kernels = os.path.join(self.DATA, "kernels.json")
            r, doc = self.run_json("sweep", sweep, "--kernels", kernels, "--cores", "2")
        self.assertEqual([x["baseline"] for x in doc["links"]], ["baselines/K2-job7.json"])
        with open(os.path.join(self.DATA, "fit-10gbit.json")) as f:
            rows = [(x["count"], x["ranks"], x["time_median_s"]) for x in json.load(f)["rows"]
                    if x["strategy"] == "allreduce" and x["transport"] == "ring"]
        with open(kernels) as f:
            rates = qm.Rates.from_kernels_json(json.load(f))
        want = qm.fit_host(rows, rates, 2)
        self.assertAlmostEqual(doc["links"][0]["link"]["gamma_s_per_byte"], want.gamma, delta=1e-6 * want.gamma)
        self.assertEqual(sorted(os.path.basename(x["file"]) for x in doc["steps"]), k2)
        for x in doc["steps"]:
            self.assertEqual((x["ranks"], x["rate"]), (2, "K2-alloc"))
            self.assertGreater(x["predicted_s"], 0.0)
            self.assertAlmostEqual(x["error"], x["predicted_s"] / x["measured_s"] - 1.0, places=12)
        self.assertIn("K2-alloc", r.stdout)
        # A warning exactly when the refit misses a row of its own baseline by more than FIT_WARN.
        misses = [x for x in doc["links"][0]["fit_relative_residuals"] if abs(x) > 0.25]
        self.assertEqual("warning: K2-alloc's alpha-beta fit misses its own baseline" in r.stdout, bool(misses))

    def test_sweep_names_what_it_lacks(self):
        kernels = os.path.join(self.DATA, "kernels.json")
        with tempfile.TemporaryDirectory() as tmp:
            sweep = os.path.join(tmp, "sweep")
            self.make_sweep(sweep, {})
            r = self.run_model("sweep", sweep, "--kernels", kernels)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("no exchange benchmark of K >= 2", r.stderr)
            # A K = 3 trace whose allocation has no baseline.
            import shutil
            shutil.copy(os.path.join(self.DATA, "fit-10gbit.json"), os.path.join(sweep, "baselines", "K2-job1.json"))
            shutil.copy(step_files(self.DATA)["mlp-10gbit-K3-allreduce-fp32.h5"],
                        os.path.join(sweep, "traces", "mlp-10gbit-K3-allreduce-fp32.h5"))
            r = self.run_model("sweep", sweep, "--kernels", kernels)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("link K3-alloc was not fitted (no exchange benchmark of that allocation)", r.stderr)
            r = self.run_model("sweep", sweep, "--kernels", kernels, "--cores", "0")
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("--cores must be at least 1", r.stderr)

    def make_main_job(self, tmp):
        """A main-job directory (qsgd-sweep --predict) from the committed set:
        the MLP's K = 1 fp32 trace, its K = 2 traces at 1 Gbit/s and a PyTorch
        DDP trace of the committed sweep beside them; calibration/ holds the
        set's kernel rates, machine, bursts and unshaped and 1 Gbit/s fits,
        and its unshaped fit again as the shared-memory (local) one."""
        import shutil
        steps = step_files(self.DATA)
        cal = os.path.join(tmp, "calibration")
        os.makedirs(cal)
        names = ["mlp-local-K1-allreduce-fp32.h5"] + sorted(n for n in steps if n.startswith("mlp-1gbit-K2-"))
        for n in names:
            shutil.copy(steps[n], os.path.join(tmp, n))
        shutil.copy(os.path.join(REPO, "results", "reference", "sweep", "mlp-1gbit-K2-ddp-fp32.h5"), tmp)
        shutil.copy(os.path.join(REPO, "results", "reference", "tta", "mlp-1gbit-K2-powersgd-r4-ef-seed1.h5"), tmp)
        for f in ("kernels.json", "machine.json", "links.json", "fit-unshaped.json", "fit-1gbit.json"):
            shutil.copy(os.path.join(self.DATA, f), os.path.join(cal, f))
        shutil.copy(os.path.join(self.DATA, "fit-unshaped.json"), os.path.join(cal, "fit-local.json"))
        return names[1:]

    def test_predict_reads_a_main_job_with_its_own_calibration(self):
        with tempfile.TemporaryDirectory() as tmp:
            k2 = self.make_main_job(tmp)
            r = self.run_model("predict", tmp, "--json", os.path.join(tmp, "model.json"))
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(tmp, "model.json")) as f:
                doc = json.load(f)
            plots = qsgd_report_module().load_script(os.path.join(REPO, "benchmarks", "scaling", "qsgd-plots"),
                                                     "qsgd_plots")
            rows = plots.load_rows([tmp])
            curves = plots.load_curves([tmp], rows)
        # Every K = 2 trace of the suite, none of the peer's; PowerSGD, which the
        # model prices only with its tensors' shapes, listed as not predicted.
        self.assertEqual(sorted(x["file"] for x in doc["steps"]), k2)
        self.assertEqual(doc["skipped"], [{"file": "mlp-1gbit-K2-powersgd-r4-ef-seed1.h5",
                                           "why": "powersgd needs the shapes of the tensors, which only a "
                                                  "replayed description gives"}])
        self.assertIn("not predicted: mlp-1gbit-K2-powersgd-r4-ef-seed1.h5", r.stdout)
        for x in doc["steps"]:
            self.assertAlmostEqual(x["error"], x["predicted_s"] / x["measured_s"] - 1.0, places=12)
            self.assertEqual(x["within_spread"], abs(x["error"]) <= x["step_spread"])
            self.assertEqual("off" in next(l for l in r.stdout.splitlines() if x["name"] in l and "1gbit" in l),
                             not x["within_spread"])
        # Shared memory is fitted on its own rows as an unshaped host link.
        with open(os.path.join(self.DATA, "fit-unshaped.json")) as f:
            rows_u = [(x["count"], x["ranks"], x["time_median_s"]) for x in json.load(f)["rows"]
                      if x["strategy"] == "allreduce" and x["transport"] == "ring"]
        with open(os.path.join(self.DATA, "kernels.json")) as f:
            rates = qm.Rates.from_kernels_json(json.load(f))
        local = next(x for x in doc["links"] if x["rate"] == "local")
        want = qm.fit_host(rows_u, rates, doc["cores"])
        self.assertAlmostEqual(local["link"]["gamma_s_per_byte"], want.gamma, delta=1e-9 * want.gamma)
        # A curve per configuration but the fp32 ring at K = 2, each break-even on the curve's side of 1%.
        self.assertEqual(sorted(c["name"] for c in doc["curves"]),
                         sorted(x["name"] for x in doc["steps"] if x["strategy"] != "allreduce"))
        for c in doc["curves"]:
            pb = c["pays_below_gbit"]
            for g, sp in zip(c["gbit"], c["speedup"]):
                if pb is None or pb == 0:
                    self.assertEqual(sp > 1.0 + qm.PAYS, pb is None, "%s at %g" % (c["name"], g))
                elif abs(math.log(g / pb)) > 0.01:
                    self.assertEqual(sp > 1.0 + qm.PAYS, g < pb, "%s at %g Gbit/s, break-even %g" % (c["name"], g, pb))
        # qsgd-plots finds each curve's configuration among the traces.
        self.assertEqual(sorted(curves), sorted(c["name"] for c in doc["curves"]))

    def test_predict_names_what_it_lacks(self):
        import shutil
        with tempfile.TemporaryDirectory() as tmp:
            self.make_main_job(tmp)
            r = self.run_model("predict", tmp, "--calibration", os.path.join(tmp, "nowhere"))
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("nowhere: no calibration directory", r.stderr)
            os.remove(os.path.join(tmp, "calibration", "fit-unshaped.json"))
            r = self.run_model("predict", tmp)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("no fit-unshaped.json", r.stderr)
            shutil.copy(os.path.join(self.DATA, "fit-unshaped.json"), os.path.join(tmp, "calibration"))
            os.remove(os.path.join(tmp, "mlp-local-K1-allreduce-fp32.h5"))
            r = self.run_model("predict", tmp)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("no K = 1 fp32 allreduce trace", r.stderr)

    def test_a_missing_directory_is_named(self):
        r = self.run_model("fit", "/nonexistent/model-data")
        self.assertEqual(r.returncode, 2)
        self.assertIn("/nonexistent/model-data/machine.json", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[1:])
