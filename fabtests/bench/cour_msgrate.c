/*
 * cour_msgrate: message rate from client to server, any provider; 64-byte messages and a
 * window of 256 by default (-S, -W to change). `cour_msgrate [opts]` is the server,
 * `cour_msgrate [opts] <host>` the client, which prints messages/s and
 * `RESULT rate <size> <msgs_per_s>`. The engine is in cour_stream.c.
 */
#include "cour_stream.h"

int main(int argc, char **argv)
{
	return cour_stream_main(argc, argv, COUR_STREAM_RATE);
}
