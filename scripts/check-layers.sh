#!/usr/bin/env bash
# check-layers.sh: keep the courier provider's layering honest (docs/architecture.md).
# Sources in prov/courier/src are layered by directory: util/ (utilities) < wire/
# (wires) < proto/ (the protocol engine) < fi/ (libfabric objects and fi_ops
# adapters).  Dependencies point one way, objects -> engine -> wires -> utilities,
# so that a lower layer can be built, tested and reasoned about without the ones
# above it.  A file may #include "..." only headers of its own layer or a lower one,
# and the quoted includes between headers must not form a cycle.  Includes resolve
# as the compiler does with -I prov/courier/src: own directory first, then src/.
# Usage: scripts/check-layers.sh [ROOT]; exit 0 clean, 1 on violations, 2 on misuse.
set -euo pipefail

prog=check-layers
src=prov/courier/src

if [ $# -gt 1 ]; then
	echo "usage: $0 [ROOT]" >&2
	exit 2
fi
root=${1:-$(dirname "$0")/..}

if ! cd "$root" 2>/dev/null || [ ! -d "$src" ]; then
	echo "$prog: no $src under '$root'" >&2
	exit 2
fi

# Every regular file under src/ can be the target of an include (the compiler
# would pick it up), but only .c and .h files are scanned and must sit in a layer.
# Sorting keeps the report stable across filesystems and locales.
mapfile -t all_files < <(find "$src" -type f | LC_ALL=C sort)
mapfile -t sources < <(printf '%s\n' "${all_files[@]}" | grep -E '\.[ch]$' || true)

if [ ${#sources[@]} -eq 0 ]; then
	echo "$prog: no .c or .h files under $root/$src" >&2
	exit 2
fi

# A single awk pass does the rest: forking per file or per include would make a
# pre-commit hook noticeably slow.  Plain POSIX awk (mawk is the default on
# Debian/Ubuntu CI images), so no gawk extensions.
LC_ALL=C awk -v src="$src" -v prog="$prog" -v known_list="$(printf '%s\n' "${all_files[@]}")" '
# Layer of a root-relative path, or "" for files outside the layered tree.
function layer_of(path,    rest, n, parts) {
	if (index(path, src "/") != 1)
		return ""
	rest = substr(path, length(src) + 2)
	n = split(rest, parts, "/")
	if (n == 1)
		return ""
	if (parts[1] in rank)
		return parts[1]
	return ""
}

# Collapse "." and ".." the way the compiler does when it opens the file, so
# that "../fi/cour_ep.h" from proto/ is recognised as the fi-layer header it is.
function normalize(path,    n, parts, i, out, depth, j) {
	n = split(path, parts, "/")
	depth = 0
	for (i = 1; i <= n; i++) {
		if (parts[i] == "" || parts[i] == ".")
			continue
		if (parts[i] == ".." && depth > 0 && stack[depth] != "..") {
			depth--
			continue
		}
		stack[++depth] = parts[i]
	}
	out = ""
	for (j = 1; j <= depth; j++)
		out = out (j > 1 ? "/" : "") stack[j]
	return out
}

function dirname(path) {
	if (path !~ /\//)
		return "."
	sub(/\/[^\/]*$/, "", path)
	return path
}

# Quoted-include search order of cc -I src: the includer'"'"'s directory, then src/.
# Anything else (generated config.h, system headers spelled with quotes) is not
# ours to police.
function resolve(from, inc,    p) {
	if (inc ~ /^\//)
		return ""
	p = normalize(dirname(from) "/" inc)
	if (p in known)
		return p
	p = normalize(src "/" inc)
	if (p in known)
		return p
	return ""
}

function is_header(path) {
	return path ~ /\.h$/
}

# Depth-first search over header -> header edges; a grey node reached again
# closes a cycle, which is reported as the path from that node back to itself.
function visit(h,    i, e, t, k, msg) {
	color[h] = 1
	path_stack[++path_depth] = h
	for (i = 1; i <= nedges[h]; i++) {
		e = edge[h, i]
		t = edge_to[e]
		if (color[t] == 1) {
			for (k = path_depth; k > 0 && path_stack[k] != t; k--)
				;
			msg = ""
			for (; k <= path_depth; k++)
				msg = msg path_stack[k] " -> "
			msg = msg t
			printf "%s:%d: include cycle: %s\n", edge_file[e], edge_line[e], msg
			cycles++
		} else if (color[t] == 0) {
			visit(t)
		}
	}
	path_depth--
	color[h] = 2
}

BEGIN {
	rank["util"] = 0; rank["wire"] = 1; rank["proto"] = 2; rank["fi"] = 3
	n = split(known_list, kl, "\n")
	for (i = 1; i <= n; i++)
		if (kl[i] != "")
			known[kl[i]] = 1

	# Files whose directory is not a layer would escape every rule below,
	# so a new directory has to be given a place before it can hold code.
	for (i = 1; i < ARGC; i++) {
		f = ARGV[i]
		nfiles++
		order[nfiles] = f
		if (layer_of(f) == "") {
			printf "%s:1: not in a layer: put it in util/, wire/, proto/ or fi/\n", f
			violations++
		}
	}
}

# Only quoted includes at the start of a preprocessor line; angle brackets
# name headers from outside the provider.
/^[ \t]*#[ \t]*include[ \t]*"/ {
	inc = $0
	sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", inc)
	if (index(inc, "\"") == 0)
		next
	inc = substr(inc, 1, index(inc, "\"") - 1)
	target = resolve(FILENAME, inc)
	if (target == "")
		next
	includes++

	from_layer = layer_of(FILENAME)
	to_layer = layer_of(target)
	if (from_layer != "" && to_layer != "" && rank[to_layer] > rank[from_layer]) {
		printf "%s:%d: includes \"%s\": layer %s may not include layer %s\n",
			FILENAME, FNR, inc, from_layer, to_layer
		violations++
	}

	if (is_header(FILENAME) && is_header(target)) {
		nedge++
		edge_to[nedge] = target
		edge_file[nedge] = FILENAME
		edge_line[nedge] = FNR
		edge[FILENAME, ++nedges[FILENAME]] = nedge
	}
}

END {
	for (i = 1; i <= nfiles; i++)
		if (is_header(order[i]) && color[order[i]] == 0)
			visit(order[i])

	if (violations || cycles) {
		printf "%s: %d layer violation(s), %d include cycle(s) in %d files\n",
			prog, violations, cycles, nfiles
		exit 1
	}
	printf "%s: %d files, %d includes, layers util < wire < proto < fi respected, no include cycle\n",
		prog, nfiles, includes
}
' "${sources[@]}" </dev/null
