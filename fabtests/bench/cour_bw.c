/*
 * cour_bw: streaming bandwidth from client to server, any provider. `cour_bw [opts]` is the
 * server, `cour_bw [opts] <host>` the client, which prints MB/s (10^6 bytes/s) per size and
 * `RESULT bw <size> <MBps>`. -W sets the window of outstanding sends (default 64), -v checks
 * every byte at the receiver. The engine is in cour_stream.c.
 */
#include "cour_stream.h"

int main(int argc, char **argv)
{
	return cour_stream_main(argc, argv, COUR_STREAM_BW);
}
