/*
 * Provider entry: fi_prov_ini, the FI_COURIER_* parameters, and the "not supported" slots that
 * every ops table uses for what courier does not offer.
 */
#include "cour_fi.h"
#include "proto/cour_wire_fmt.h"

#include <stdio.h>

struct cour_params cour_params = {
	.mtu = 0,
	.window = 256,
	.win_idle_ms = 200,
	.credits = 64,
	.credits_max = 8192,
	.eager_max = 524288,
	.inject_size = 65536,
	.tx_size = 1024,
	.rx_size = 1024,
	.unexp_max = 64u << 20,
	.ack_delay_us = 20,
	.nudge_us = 100,
	.rto_min_us = 1000,
	.rto_max_us = 500000,
	.cc = 1,
	.cc_target_us = 100,
	.peer_timeout_ms = 300000,
	.peer_warn_ms = 10000,
	.refused_grace_ms = 1000,
	.linger_ms = 10000,
	.manual_thread = 1,
	.checksum = 0,
	.stats = 0,
	.sockbuf = 8u << 20,
	.udp_gso = 1,
	.udp_pack = 1,
	.udp_gro = 1,
	.gso_segs = 64,
	.iface_addr = NULL,
	.fault = NULL,
	.auth_skew_s = 60,
	.cma_refuse_after = -1,
	.shm_lone = -1,
	.pull_ns = -1,
	.wire = NULL,
	.shm = 1,
	.shm_push = 1,
	.trace = NULL,
	.trace_snap = 256,
	.trace_max = 1024,
};

/* libfabric unloads us after this returns: no thread of ours may outlive it. */
static void cour_fini(void)
{
	int n = cour_threads_stop_all();

	if (n)
		COUR_WARN(FI_LOG_CORE, "%d provider thread(s) still ran at unload (a domain or "
			  "passive endpoint left open, or a close refused with -FI_EBUSY): "
			  "stopped\n", n);
}

struct fi_provider cour_prov = {
	.version = COUR_PROV_VERSION,
	.fi_version = COUR_FI_VERSION,
	.name = COUR_PROV_NAME,
	.getinfo = cour_getinfo,
	.fabric = cour_fabric_open,
	.cleanup = cour_fini,
};

/* Reads a size parameter, keeping the default when unset; rejects values outside [lo, hi]. */
static void cour_param_size(const char *name, size_t *val, size_t lo, size_t hi)
{
	size_t v;

	if (fi_param_get_size_t(&cour_prov, name, &v) != FI_SUCCESS)
		return;
	if (v < lo || v > hi) {
		COUR_WARN(FI_LOG_CORE, "FI_COURIER_%s=%zu outside [%zu, %zu], keeping %zu\n",
			  name, v, lo, hi, *val);
		return;
	}
	*val = v;
}

static void cour_param_int(const char *name, int *val, int lo, int hi)
{
	int v;

	if (fi_param_get_int(&cour_prov, name, &v) != FI_SUCCESS)
		return;
	if (v < lo || v > hi) {
		COUR_WARN(FI_LOG_CORE, "FI_COURIER_%s=%d outside [%d, %d], keeping %d\n",
			  name, v, lo, hi, *val);
		return;
	}
	*val = v;
}

static void cour_params_define(void)
{
	struct cour_params *p = &cour_params;

	fi_param_define(&cour_prov, "mtu", FI_PARAM_SIZE_T,
		"Largest UDP payload per packet, bytes; 0 picks per peer from the route's MTU "
		"(65000 on loopback) (default: %zu)", p->mtu);
	fi_param_define(&cour_prov, "window", FI_PARAM_SIZE_T,
		"Send window per peer, packets in flight unacknowledged, a power of two 8..4096 "
		"(default: %zu)",
		p->window);
	fi_param_define(&cour_prov, "credits", FI_PARAM_SIZE_T,
		"Credit units (256 bytes each; a message costs 1 + bytes / 256, an RTS 1) every "
		"peer may have unconsumed at a receiver before it is granted more; the same on every "
		"process, 2..16384 (default: %zu)", p->credits);
	fi_param_define(&cour_prov, "credits_max", FI_PARAM_SIZE_T,
		"Credit units a receiver lends one peer at most, out of FI_COURIER_UNEXP_MAX, when "
		"it runs short; at least FI_COURIER_CREDITS, up to 262144 (default: %zu)",
		p->credits_max);
	fi_param_define(&cour_prov, "eager_max", FI_PARAM_SIZE_T,
		"Largest message sent eagerly, bytes; larger messages use rendezvous "
		"(default: %zu)", p->eager_max);
	fi_param_define(&cour_prov, "inject_size", FI_PARAM_SIZE_T,
		"Bytes copied at call time by fi_inject and FI_INJECT, 16..65536 (default: %zu)",
		p->inject_size);
	fi_param_define(&cour_prov, "tx_size", FI_PARAM_SIZE_T,
		"Transmit queue depth per endpoint, operations (default: %zu)", p->tx_size);
	fi_param_define(&cour_prov, "rx_size", FI_PARAM_SIZE_T,
		"Posted receives an endpoint guarantees (rx_attr->size); more may be posted while "
		"memory lasts (default: %zu)", p->rx_size);
	fi_param_define(&cour_prov, "unexp_max", FI_PARAM_SIZE_T,
		"An endpoint's budget, bytes, for credits lent to peers beyond FI_COURIER_CREDITS "
		"and for unexpected messages whose credit went back at once; past it, credits "
		"come back only as messages are received. A receiver buffers at most this plus "
		"peers x FI_COURIER_CREDITS x 256 bytes of unexpected messages (default: %zu)",
		p->unexp_max);
	fi_param_define(&cour_prov, "ack_delay", FI_PARAM_INT,
		"How long an ACK may wait to ride on outgoing data, microseconds (default: %d)",
		p->ack_delay_us);
	fi_param_define(&cour_prov, "nudge", FI_PARAM_INT,
		"A peer whose ACK is this late, microseconds (or two round trips and the ACK "
		"delay, if longer), is asked for it by a probe, which its progress thread wakes "
		"for while its application computes (a doorbell socket on the endpoint's port); "
		"0: no probes and no doorbell (default: %d)", p->nudge_us);
	fi_param_define(&cour_prov, "rto_min", FI_PARAM_INT,
		"Retransmit timeout floor, microseconds (default: %d)", p->rto_min_us);
	fi_param_define(&cour_prov, "rto_max", FI_PARAM_INT,
		"Retransmit timeout ceiling after backoff, microseconds (default: %d)",
		p->rto_max_us);
	fi_param_define(&cour_prov, "cc", FI_PARAM_BOOL,
		"Congestion control for peers across the network: a window per peer driven by "
		"queueing delay, loss-based beside TCP; 0: the send window alone (default: %d)",
		p->cc);
	fi_param_define(&cour_prov, "cc_target", FI_PARAM_INT,
		"Queueing delay congestion control aims at, microseconds above the path's lowest "
		"RTT (default: %d)", p->cc_target_us);
	fi_param_define(&cour_prov, "win_idle", FI_PARAM_INT,
		"A peer's send and receive windows grow with what it has in flight and are freed "
		"once it has been quiet this long, milliseconds; 0 frees them as soon as it is "
		"(default: %d)", p->win_idle_ms);
	fi_param_define(&cour_prov, "peer_timeout", FI_PARAM_INT,
		"Silence after which a peer with pending operations is declared unreachable "
		"and they complete in error, milliseconds; long enough for a debugger pause or a "
		"descheduled process. A same-host peer whose process exits, or a peer that "
		"restarts, fails its operations at once (default: %d)", p->peer_timeout_ms);
	fi_param_define(&cour_prov, "peer_warn", FI_PARAM_INT,
		"Silence of a peer we wait on after which a warning says so (it is not yet "
		"declared unreachable), milliseconds (default: %d)", p->peer_warn_ms);
	fi_param_define(&cour_prov, "refused_grace", FI_PARAM_INT,
		"A peer whose host answers our packets with ICMP port unreachable (nothing listens "
		"there any more) is declared unreachable once it stayed silent this long after, "
		"milliseconds: room for a restart on the same port (default: %d)",
		p->refused_grace_ms);
	fi_param_define(&cour_prov, "linger", FI_PARAM_INT,
		"How long fi_close of an endpoint waits for what was sent, injected or written "
		"to be delivered (like SO_LINGER); what is still undelivered then is logged with "
		"its peer, milliseconds (default: %d)", p->linger_ms);
	fi_param_define(&cour_prov, "manual_thread", FI_PARAM_BOOL,
		"Under FI_PROGRESS_MANUAL, still run a progress thread that serves RMA, atomics "
		"and acknowledgements aimed at this process while the application computes (it "
		"stands back while the application polls) (default: %d)", p->manual_thread);
	fi_param_define(&cour_prov, "checksum", FI_PARAM_BOOL,
		"Checksum payloads as well as headers (default: %d)", p->checksum);
	fi_param_define(&cour_prov, "stats", FI_PARAM_BOOL,
		"Print each endpoint's statistics to stderr when it closes (default: %d)",
		p->stats);
	fi_param_define(&cour_prov, "sockbuf", FI_PARAM_SIZE_T,
		"Socket send and receive buffer size requested, bytes (default: %zu)", p->sockbuf);
	fi_param_define(&cour_prov, "udp_gso", FI_PARAM_BOOL,
		"Send a run of packets to one peer in one system call with UDP GSO (UDP_SEGMENT; "
		"off by itself where the kernel or device refuses it) (default: %d)", p->udp_gso);
	fi_param_define(&cour_prov, "udp_pack", FI_PARAM_BOOL,
		"Pack small packets queued together for one peer into one UDP datagram, up to "
		"the path's MTU (default: %d)", p->udp_pack);
	fi_param_define(&cour_prov, "udp_gro", FI_PARAM_BOOL,
		"Receive coalesced trains of packets with UDP GRO (UDP_GRO) (default: %d)",
		p->udp_gro);
	fi_param_define(&cour_prov, "gso_segs", FI_PARAM_SIZE_T,
		"Packets per UDP GSO call at most, 1..64; a call also stays under 64 KB, the "
		"burst TCP's segmentation offload sends (default: %zu)", p->gso_segs);
	fi_param_define(&cour_prov, "iface_addr", FI_PARAM_STRING,
		"Local IP address endpoints bind to when fi_getinfo names no node "
		"(default: 127.0.0.1)");
	fi_param_define(&cour_prov, "fault", FI_PARAM_STRING,
		"Fault injection for tests: drop=P,dup=P,reorder=P,corrupt=P,seed=N with P in "
		"percent of packets sent (default: none)");
	fi_param_define(&cour_prov, "wire", FI_PARAM_STRING,
		"Transport under the protocol engine: udp, or loop (endpoints of one process "
		"only, for tests) (default: udp)");
	fi_param_define(&cour_prov, "shm", FI_PARAM_BOOL,
		"Reach peers on the same host (same kernel, network and pid namespaces) through "
		"shared memory instead of UDP (default: %d)", p->shm);

	fi_param_define(&cour_prov, "shm_push", FI_PARAM_BOOL,
		"Same-host RMA writes of 32 KiB and more are copied by the initiator straight "
		"into the target's registered region (published in its ring, checked by the "
		"initiator, held against closing) when nothing else of the initiator's is in "
		"flight to it; 0: the target always checks and copies (default: %d)", p->shm_push);
	fi_param_define(&cour_prov, "cma_refuse_after", FI_PARAM_INT,
		"For tests: after this many single copies (process_vm_readv/writev) in this "
		"process, the rest fail as if the kernel refused them, as when a process "
		"becomes undumpable mid-run (default: %d, never)", p->cma_refuse_after);
	fi_param_define(&cour_prov, "shm_lone", FI_PARAM_INT,
		"For tests: a same-host message of 16 KiB to 256 KiB alone on its way to its "
		"peer goes by single copy: 1 always, 0 never, -1 when this endpoint's copies "
		"into rings run slower than 32 GB/s (default: %d)", p->shm_lone);
	fi_param_define(&cour_prov, "pull_ns", FI_PARAM_INT,
		"For tests: what a single copy costs before it copies a byte, in ns, instead of "
		"the cost measured at the first endpoint open; from 1500 a message alone goes by "
		"single copy only from 128 KiB, also under FI_COURIER_SHM_LONE=1 (default: %d, "
		"measured)", p->pull_ns);
	fi_param_define(&cour_prov, "lease_hold", FI_PARAM_INT,
		"For tests: milliseconds an initiator waits, holding the lease, before copying "
		"its half of a shared RMA, as a descheduled process would (default: %d)",
		p->lease_hold_ms);
	fi_param_define(&cour_prov, "trace", FI_PARAM_STRING,
		"Packet capture: every endpoint writes each packet it sends and receives (UDP "
		"and shared memory) to PATH.<pid>.<n>.pcapng, or DIR/courier.<pid>.<n>.pcapng "
		"when this names a directory, for Wireshark or tshark with "
		"contrib/wireshark/courier.lua (default: none)");
	fi_param_define(&cour_prov, "trace_snap", FI_PARAM_SIZE_T,
		"Packet capture: bytes of each packet kept, 32..65535 (a header is 32 to 80 "
		"bytes) (default: %zu)", p->trace_snap);
	fi_param_define(&cour_prov, "trace_max", FI_PARAM_SIZE_T,
		"Packet capture: size bound of each file, MiB; past it, nothing more is "
		"written (said once) (default: %zu)", p->trace_max);

	fi_param_define(&cour_prov, "auth_key_file", FI_PARAM_STRING,
		"A file holding the job's secret (16 to 4096 bytes, readable by its owner only): "
		"endpoints whose application passes no auth_key authenticate every UDP datagram "
		"with it, and accept only datagrams authenticated with the same secret "
		"(default: none)");
	fi_param_define(&cour_prov, "auth_skew", FI_PARAM_INT,
		"With a key: an authenticated datagram stamped more than this many seconds from "
		"the receiver's clock is refused as a replay; hosts' clocks must agree this well "
		"(default: %d)", p->auth_skew_s);

	cour_param_size("mtu", &p->mtu, 0, 65000);
	if (p->mtu && p->mtu < 512) {
		COUR_WARN(FI_LOG_CORE, "FI_COURIER_MTU=%zu too small, using 512\n", p->mtu);
		p->mtu = 512;
	}
	cour_param_size("window", &p->window, 8, 4096);
	if (p->window & (p->window - 1)) {
		/* window slots are seq % window: only a power of two stays right across the
		 * 2^32 wrap of the sequence numbers */
		size_t w = 8;
		while (w < p->window)
			w <<= 1;
		COUR_WARN(FI_LOG_CORE, "FI_COURIER_WINDOW=%zu is not a power of two, using %zu\n",
			  p->window, w);
		p->window = w;
	}
	cour_param_size("credits", &p->credits, 2, 16384);
	cour_param_size("credits_max", &p->credits_max, 2, COUR_CREDIT_WIN_MAX);
	if (p->credits_max < p->credits)
		p->credits_max = p->credits;
	cour_param_size("eager_max", &p->eager_max, 0, 1u << 24);
	cour_param_size("inject_size", &p->inject_size, 16, 65536);
	cour_param_size("tx_size", &p->tx_size, 16, 1u << 20);
	cour_param_size("rx_size", &p->rx_size, 16, 1u << 20);
	cour_param_size("unexp_max", &p->unexp_max, 0, (size_t)1 << 40);
	cour_param_int("ack_delay", &p->ack_delay_us, 0, 100000);
	cour_param_int("nudge", &p->nudge_us, 0, 1000000);
	cour_param_int("rto_min", &p->rto_min_us, 10, 10000000);
	cour_param_int("rto_max", &p->rto_max_us, 100, 60000000);
	fi_param_get_bool(&cour_prov, "cc", &p->cc);
	cour_param_int("cc_target", &p->cc_target_us, 1, 1000000);
	cour_param_int("win_idle", &p->win_idle_ms, 0, 3600 * 1000);
	cour_param_int("peer_timeout", &p->peer_timeout_ms, 10, 24 * 3600 * 1000);
	cour_param_int("peer_warn", &p->peer_warn_ms, 10, 24 * 3600 * 1000);
	cour_param_int("linger", &p->linger_ms, 0, 3600 * 1000);
	cour_param_int("refused_grace", &p->refused_grace_ms, 0, 24 * 3600 * 1000);
	fi_param_get_bool(&cour_prov, "manual_thread", &p->manual_thread);
	fi_param_get_bool(&cour_prov, "checksum", &p->checksum);
	fi_param_get_bool(&cour_prov, "stats", &p->stats);
	cour_param_size("sockbuf", &p->sockbuf, 65536, 1u << 30);
	fi_param_get_bool(&cour_prov, "udp_gso", &p->udp_gso);
	fi_param_get_bool(&cour_prov, "udp_gro", &p->udp_gro);
	fi_param_get_bool(&cour_prov, "udp_pack", &p->udp_pack);
	cour_param_size("gso_segs", &p->gso_segs, 1, 64);
	fi_param_get_str(&cour_prov, "iface_addr", &p->iface_addr);
	fi_param_get_str(&cour_prov, "fault", &p->fault);
	fi_param_get_str(&cour_prov, "wire", &p->wire);
	fi_param_get_bool(&cour_prov, "shm", &p->shm);
	fi_param_get_bool(&cour_prov, "shm_push", &p->shm_push);
	cour_param_int("cma_refuse_after", &p->cma_refuse_after, -1, INT32_MAX);
	cour_param_int("shm_lone", &p->shm_lone, -1, 1);
	cour_param_int("pull_ns", &p->pull_ns, -1, 1000000);
	cour_param_int("lease_hold", &p->lease_hold_ms, 0, 60000);
	fi_param_get_str(&cour_prov, "auth_key_file", &p->auth_key_file);
	cour_param_int("auth_skew", &p->auth_skew_s, 1, 24 * 3600);
	fi_param_get_str(&cour_prov, "trace", &p->trace);
	cour_param_size("trace_snap", &p->trace_snap, 32, 65535);
	cour_param_size("trace_max", &p->trace_max, 1, (size_t)1 << 20);
	if (p->rto_max_us < p->rto_min_us)
		p->rto_max_us = p->rto_min_us;
}

FI_EXT_INI
{
	cour_params_define();
	return &cour_prov;
}

int cour_no_close(struct fid *fid) { return -FI_ENOSYS; }
int cour_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags) { return -FI_ENOSYS; }
int cour_no_control(struct fid *fid, int command, void *arg) { return -FI_ENOSYS; }
int cour_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	return -FI_ENOSYS;
}
int cour_no_tostr(const struct fid *fid, char *buf, size_t len) { return -FI_ENOSYS; }
int cour_no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops, void *context)
{
	return -FI_ENOSYS;
}
