/*
 * The engine's half of a domain, embedded in struct cour_domain (fi/cour_fi.h): small and apart from
 * proto/cour_engine.h so that the object layer's domain needs nothing else of the engine.
 */
#ifndef COUR_PDOM_H
#define COUR_PDOM_H

struct cour_lock;
struct cour_pep;
struct cour_region;

/* The engine's half of a domain: its lock, its enabled endpoints and its regions. */
struct cour_pdom {
	struct cour_lock    *lock;
	struct cour_pep     *peps;            /* DL via pdom_next: enabled endpoints */
	struct cour_region  *regions;         /* uthash on key */
	/* the epoll set of endpoints' doorbell sockets, which the progress thread sleeps on
	 * (wire/cour_udp.c); 0 or less: no thread, no doorbells */
	int                  bell_epfd;
};

#endif
