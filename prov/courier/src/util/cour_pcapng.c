/*
 * The pcapng writer (cour_pcapng.h). Every block is
 *
 *   type (4) | total length (4) | body, padded to 4 | options | total length (4)
 *
 * with the length repeated at the end so a reader can walk backwards, and options as
 * code (2) | length (2) | value padded to 4, closed by code 0. Built in place in the buffer.
 */
#include "util/cour_util.h"
#include "util/cour_pcapng.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define COUR_PCAPNG_SHB 0x0a0d0d0au
#define COUR_PCAPNG_IDB 0x00000001u
#define COUR_PCAPNG_EPB 0x00000006u
#define COUR_PCAPNG_BOM 0x1a2b3c4du

enum {                        /* option codes */
	COUR_OPT_END = 0,
	COUR_OPT_COMMENT = 1,
	COUR_OPT_SHB_USERAPPL = 4,
	COUR_OPT_IF_NAME = 2,
	COUR_OPT_IF_DESC = 3,
	COUR_OPT_IF_TSRESOL = 9,
	COUR_OPT_EPB_FLAGS = 2,
};

#define COUR_PCAPNG_TEXT_MAX 256   /* longest name, description or comment written */

static inline size_t cour_pad4(size_t n) { return (n + 3) & ~(size_t)3; }

static uint8_t *cour_put32(uint8_t *at, uint32_t v)
{
	memcpy(at, &v, 4);
	return at + 4;
}

static uint8_t *cour_put_opt(uint8_t *at, uint16_t code, const void *val, size_t len)
{
	uint16_t h[2] = { code, (uint16_t)len };

	memcpy(at, h, sizeof(h));
	at += sizeof(h);
	if (len)
		memcpy(at, val, len);
	memset(at + len, 0, cour_pad4(len) - len);
	return at + cour_pad4(len);
}

static size_t cour_opt_len(size_t len) { return 4 + cour_pad4(len); }

static size_t cour_text_len(const char *s)
{
	return s ? strnlen(s, COUR_PCAPNG_TEXT_MAX) : 0;
}

static void cour_pcapng_stop(struct cour_pcapng *p, const char *why)
{
	if (!p->stopped)
		COUR_WARN(FI_LOG_EP_DATA, "packet capture %s: %s; %" PRIu64 " packets written, "
			  "nothing more will be\n", p->path, why, p->packets);
	p->stopped = true;
}

void cour_pcapng_flush(struct cour_pcapng *p)
{
	size_t done = 0;

	while (done < p->len && p->fd >= 0) {
		ssize_t n = write(p->fd, p->buf + done, p->len - done);

		if (n > 0) {
			done += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			cour_pcapng_stop(p, n < 0 ? strerror(errno) : "short write");
			break;
		}
	}
	p->len = 0;
	p->oldest_ns = 0;
}

/* Room for a block of len bytes: the buffer is emptied first if need be. false: the block
 * would take the file past its bound (said once), or the capture has stopped. */
static bool cour_pcapng_room(struct cour_pcapng *p, size_t len)
{
	if (p->stopped)
		return false;
	if (p->size + len > p->max) {
		cour_pcapng_stop(p, "FI_COURIER_TRACE_MAX reached");
		return false;
	}
	if (p->len + len > COUR_PCAPNG_BUF)
		cour_pcapng_flush(p);
	return !p->stopped;
}

/* Close the block that starts at start and whose options end at at. */
static void cour_pcapng_end(struct cour_pcapng *p, uint8_t *start, uint8_t *at)
{
	uint32_t total = (uint32_t)(at - start) + 4;

	cour_put32(start + 4, total);
	cour_put32(at, total);
	p->len += total;
	p->size += total;
}

int cour_pcapng_open(struct cour_pcapng *p, const char *path, uint64_t max, const char *app)
{
	size_t app_len = cour_text_len(app);
	size_t len = 24 + (app_len ? cour_opt_len(app_len) : 0) + 4 + 4;
	uint64_t section = UINT64_MAX;          /* length unknown: written as we go */
	uint8_t *at, *start;

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	p->max = max;
	p->path = strdup(path);
	p->buf = malloc(COUR_PCAPNG_BUF);
	if (!p->path || !p->buf) {
		COUR_WARN(FI_LOG_EP_CTRL, "packet capture %s: out of memory\n", path);
		cour_pcapng_close(p);
		return -FI_ENOMEM;
	}
	p->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (p->fd < 0) {
		int err = errno;

		COUR_WARN(FI_LOG_EP_CTRL, "packet capture %s: %s\n", path, strerror(err));
		cour_pcapng_close(p);
		return err == EACCES || err == EPERM ? -FI_EACCES : -FI_EIO;
	}
	start = at = p->buf;
	at = cour_put32(at, COUR_PCAPNG_SHB);
	at += 4;
	at = cour_put32(at, COUR_PCAPNG_BOM);
	at = cour_put32(at, 1u | 0u << 16);     /* version 1.0 */
	memcpy(at, &section, 8);
	at += 8;
	if (app_len)
		at = cour_put_opt(at, COUR_OPT_SHB_USERAPPL, app, app_len);
	at = cour_put_opt(at, COUR_OPT_END, NULL, 0);
	assert((size_t)(at - start) + 4 == len);
	cour_pcapng_end(p, start, at);
	return 0;
}

int cour_pcapng_iface(struct cour_pcapng *p, uint16_t linktype, uint32_t snaplen,
		      const char *name, const char *desc)
{
	size_t name_len = cour_text_len(name), desc_len = cour_text_len(desc);
	size_t len = 16 + cour_opt_len(1) + 4 + 4;
	uint8_t tsresol = 9;                    /* timestamps in units of 10^-9 s */
	uint32_t lt = linktype;
	uint8_t *at, *start;

	len += name_len ? cour_opt_len(name_len) : 0;
	len += desc_len ? cour_opt_len(desc_len) : 0;
	if (!cour_pcapng_room(p, len))
		return -FI_ENOSPC;
	start = at = p->buf + p->len;
	at = cour_put32(at, COUR_PCAPNG_IDB);
	at += 4;
	at = cour_put32(at, lt);                /* link type (2), reserved (2) */
	at = cour_put32(at, snaplen);
	if (name_len)
		at = cour_put_opt(at, COUR_OPT_IF_NAME, name, name_len);
	if (desc_len)
		at = cour_put_opt(at, COUR_OPT_IF_DESC, desc, desc_len);
	at = cour_put_opt(at, COUR_OPT_IF_TSRESOL, &tsresol, 1);
	at = cour_put_opt(at, COUR_OPT_END, NULL, 0);
	assert((size_t)(at - start) + 4 == len);
	cour_pcapng_end(p, start, at);
	p->nifaces++;
	return 0;
}

void cour_pcapng_packet(struct cour_pcapng *p, uint32_t iface, uint64_t ts_ns, uint32_t flags,
			const char *comment, const struct iovec *iov, size_t iovcnt,
			uint32_t cap_len, uint32_t orig_len)
{
	size_t com_len = cour_text_len(comment);
	size_t len = 28 + cour_pad4(cap_len) + cour_opt_len(4) + 4 + 4;
	uint8_t *at, *start;
	size_t left = cap_len;

	assert(iface < p->nifaces && cap_len <= orig_len);
	len += com_len ? cour_opt_len(com_len) : 0;
	if (!cour_pcapng_room(p, len)) {
		p->lost++;
		return;
	}
	start = at = p->buf + p->len;
	at = cour_put32(at, COUR_PCAPNG_EPB);
	at += 4;
	at = cour_put32(at, iface);
	at = cour_put32(at, (uint32_t)(ts_ns >> 32));
	at = cour_put32(at, (uint32_t)ts_ns);
	at = cour_put32(at, cap_len);
	at = cour_put32(at, orig_len);
	for (size_t i = 0; i < iovcnt && left; i++) {
		size_t n = COUR_MIN(left, iov[i].iov_len);

		memcpy(at, iov[i].iov_base, n);
		at += n;
		left -= n;
	}
	assert(!left);
	memset(at, 0, cour_pad4(cap_len) - cap_len);
	at += cour_pad4(cap_len) - cap_len;
	at = cour_put_opt(at, COUR_OPT_EPB_FLAGS, &flags, 4);
	if (com_len)
		at = cour_put_opt(at, COUR_OPT_COMMENT, comment, com_len);
	at = cour_put_opt(at, COUR_OPT_END, NULL, 0);
	assert((size_t)(at - start) + 4 == len);
	cour_pcapng_end(p, start, at);
	p->packets++;
	if (!p->oldest_ns)
		p->oldest_ns = ts_ns;
	else if (ts_ns - p->oldest_ns > COUR_PCAPNG_AGE_NS)
		cour_pcapng_flush(p);
}

void cour_pcapng_close(struct cour_pcapng *p)
{
	if (p->fd >= 0) {
		cour_pcapng_flush(p);
		close(p->fd);
	}
	free(p->buf);
	free(p->path);
	p->buf = NULL;
	p->path = NULL;
	p->fd = -1;
	p->len = 0;
}
