/*
 * The provider's parameters (FI_COURIER_*), read once at fi_prov_ini (cour_init.c, where each
 * is defined with its help text; the man page lists them). Every layer reads the fields that
 * concern it; only cour_init.c writes them.
 */
#ifndef COUR_PARAMS_H
#define COUR_PARAMS_H

#include <stddef.h>

struct cour_params {
	size_t   mtu;              /* max UDP payload per packet, bytes (0: per peer, from the route) */
	size_t   window;           /* send window, packets per peer */
	int      win_idle_ms;      /* a quiet peer's windows are freed after this long */
	size_t   credits;          /* credit units every peer starts with (256 bytes each) */
	size_t   credits_max;      /* units a receiver lends one peer at most */
	size_t   eager_max;        /* largest message sent eagerly; larger ones use rendezvous */
	size_t   inject_size;      /* bytes copied at call time by fi_inject and FI_INJECT */
	size_t   tx_size;          /* transmit queue depth per endpoint */
	size_t   rx_size;          /* posted receives guaranteed per endpoint (more may be posted) */
	size_t   unexp_max;        /* budget: credits lent + unexpected bytes with credit back */
	int      ack_delay_us;     /* how long an ACK may wait for a packet to ride on */
	int      nudge_us;         /* an ACK this late (at least) draws a probe; 0: never */
	int      rto_min_us;       /* retransmit timeout floor */
	int      rto_max_us;       /* retransmit timeout ceiling (after backoff) */
	int      cc;               /* congestion control on UDP peers (proto/cour_cc.h) */
	int      cc_target_us;     /* queueing delay congestion control aims at */
	int      peer_timeout_ms;  /* silence after which a peer with pending work is unreachable */
	int      peer_warn_ms;     /* silence after which that is said once (warning) */
	int      refused_grace_ms; /* a peer whose host refuses us may be silent this long */
	int      linger_ms;        /* fi_close of an endpoint waits this long for sends to land */
	int      manual_thread;    /* a progress thread under FI_PROGRESS_MANUAL too */
	int      checksum;         /* also checksum payloads (headers are always checked) */
	int      stats;            /* print per-endpoint statistics at close */
	size_t   sockbuf;          /* SO_SNDBUF / SO_RCVBUF request, bytes */
	int      udp_gso;          /* runs of datagrams to one peer in one UDP GSO call */
	int      udp_pack;         /* small packets to one peer packed into one datagram */
	int      udp_gro;          /* take coalesced UDP GRO trains from the kernel */
	size_t   gso_segs;         /* datagrams per GSO call at most (the burst a switch sees) */
	char    *iface_addr;       /* local address to bind when no node is given */
	char    *fault;            /* fault injection spec, see wire/cour_fault.c */
	char    *wire;             /* "udp" (default) or "loop" (one process, for tests) */
	int      shm;              /* same-host peers through shared memory */
	int      shm_push;         /* same-host RMA writes copied by the initiator into windows */
	int      cma_refuse_after; /* tests: single copies past this many fail as refused; -1 */
	int      shm_lone;         /* tests: a lone 16-256 KiB message by single copy: 1 always,
				    * 0 never, -1 (default) when the ring's copies are slow */
	int      pull_ns;          /* tests: a pull's fixed cost in ns, -1 (default): measured */
	int      lease_hold_ms;    /* tests: an initiator holds a shared RMA's lease this long */
	char    *auth_key_file;    /* the job's secret when the application passes no auth_key */
	int      auth_skew_s;      /* clock difference tolerated in authenticated datagrams */
	char    *trace;            /* packet capture file prefix or directory (wire/cour_trace.h) */
	size_t   trace_snap;       /* bytes of each packet captured */
	size_t   trace_max;        /* a capture file's bound, MiB */
};
extern struct cour_params cour_params;

#endif /* COUR_PARAMS_H */
