/*
 * The streaming engine behind cour_bw (bandwidth) and cour_msgrate (message rate): the client
 * keeps a window of sends in flight to the server, the server acknowledges each full window.
 */
#ifndef COUR_STREAM_H
#define COUR_STREAM_H

enum cour_stream_kind {
	COUR_STREAM_BW,		/* MB/s (10^6 bytes/s) per size: RESULT bw <size> <MBps> */
	COUR_STREAM_RATE,	/* messages/s: RESULT rate <size> <msgs_per_s> */
};

/* Parses argv, runs the server or client role and returns the process exit status. */
int cour_stream_main(int argc, char **argv, enum cour_stream_kind kind);

#endif /* COUR_STREAM_H */
