/*
 * Where an endpoint's secret comes from: libfabric's auth_key (fi_endpoint's ep_attr, else
 * fi_domain's domain_attr), else the file FI_COURIER_AUTH_KEY_FILE names, which a launcher
 * can write per job. The secret itself is used by the wire (wire/cour_mac.h); here it is
 * only found, checked and copied.
 */
#include "cour_fi.h"
#include "wire/cour_mac.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int cour_auth_key_ok(size_t len, const char *what)
{
	if (len >= COUR_MAC_KEY_MIN && len <= COUR_MAC_KEY_MAX)
		return 0;
	COUR_WARN(FI_LOG_CORE, "%s of %zu bytes: courier's keys are shared secrets of %d to %d "
		  "bytes\n", what, len, COUR_MAC_KEY_MIN, COUR_MAC_KEY_MAX);
	return -FI_EINVAL;
}

/* The file's bytes, if only its owner (us) can read it: a secret others can read is none. */
static int cour_auth_key_file(const char *path, void **key, size_t *len)
{
	struct stat st;
	ssize_t got;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0) {
		COUR_WARN(FI_LOG_CORE, "FI_COURIER_AUTH_KEY_FILE %s: %s\n", path, strerror(errno));
		return -FI_EACCES;
	}
	if (fstat(fd, &st)) {
		COUR_WARN(FI_LOG_CORE, "FI_COURIER_AUTH_KEY_FILE %s: %s\n", path, strerror(errno));
		close(fd);
		return -FI_EACCES;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & (S_IRWXG | S_IRWXO))) {
		COUR_WARN(FI_LOG_CORE, "FI_COURIER_AUTH_KEY_FILE %s: refused: %s (chmod 600, and "
			  "own it)\n", path, !S_ISREG(st.st_mode) ? "not a regular file" :
			  st.st_uid != geteuid() ? "owned by another user" :
			  "others than its owner may read or write it");
		close(fd);
		return -FI_EACCES;
	}
	if (cour_auth_key_ok((size_t)st.st_size, "FI_COURIER_AUTH_KEY_FILE")) {
		close(fd);
		return -FI_EINVAL;
	}
	buf = malloc((size_t)st.st_size);
	if (!buf) {
		close(fd);
		return -FI_ENOMEM;
	}
	got = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (got != st.st_size) {
		COUR_WARN(FI_LOG_CORE, "FI_COURIER_AUTH_KEY_FILE %s: short read\n", path);
		free(buf);
		return -FI_EIO;
	}
	*key = buf;
	*len = (size_t)got;
	return 0;
}

int cour_auth_dup(const void *src, size_t len, void **key, size_t *key_len)
{
	*key = malloc(len);
	if (!*key)
		return -FI_ENOMEM;
	memcpy(*key, src, len);
	*key_len = len;
	return 0;
}

static int cour_auth_copy(const void *src, size_t len, const char *what, void **key,
			  size_t *key_len)
{
	int ret = cour_auth_key_ok(len, what);

	return ret ? ret : cour_auth_dup(src, len, key, key_len);
}

int cour_auth_key(const struct fi_info *info, bool with_ep, void **key, size_t *len)
{
	const struct fi_ep_attr *ea = info ? info->ep_attr : NULL;
	const struct fi_domain_attr *da = info ? info->domain_attr : NULL;

	*key = NULL;
	*len = 0;
	if (with_ep && ea && ea->auth_key_size)
		return cour_auth_copy(ea->auth_key, ea->auth_key_size, "ep_attr->auth_key", key,
				      len);
	if (da && da->auth_key_size)
		return cour_auth_copy(da->auth_key, da->auth_key_size, "domain_attr->auth_key",
				      key, len);
	if (cour_params.auth_key_file && *cour_params.auth_key_file)
		return cour_auth_key_file(cour_params.auth_key_file, key, len);
	return 0;
}

void cour_auth_key_free(void *key, size_t len)
{
	if (key)
		explicit_bzero(key, len);
	free(key);
}
