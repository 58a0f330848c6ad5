/* libc_copies_shim.c — LD_PRELOAD library for bench/libc_copies.sh: counts the calls and bytes of
 * memcpy, memmove and memset by calling address (the return address), and at exit writes one
 * line per caller to $LIBC_COPIES_OUT: "kind bytes calls object offset" (kind 0 memcpy,
 * 1 memmove, 2 memset; offset within the object, for addr2line). Callers with fewer than
 * $LIBC_COPIES_MIN_CALLS calls (default 1000) and under 16 MiB are left out.
 * The copies themselves are plain (rep movsb / rep stosb, byte loops for short ones): slower
 * than glibc's, so timings taken under it mean nothing; only the counts do.
 * Build: cc -O2 -fPIC -shared -fno-builtin -o libc_copies_shim.so libc_copies_shim.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 8192
static uintptr_t slot_addr[SLOTS];
static unsigned long long slot_bytes[SLOTS], slot_calls[SLOTS];
static int slot_kind[SLOTS];

static void note(uintptr_t ra, size_t n, int kind)
{
	unsigned h = (unsigned)((ra >> 2) * 2654435761u) % SLOTS;
	for (int i = 0; i < SLOTS; i++, h = (h + 1) % SLOTS) {
		uintptr_t cur = __atomic_load_n(&slot_addr[h], __ATOMIC_ACQUIRE);
		if (cur == 0) {
			uintptr_t expect = 0;
			if (__atomic_compare_exchange_n(&slot_addr[h], &expect, ra, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				slot_kind[h] = kind;
				cur = ra;
			} else {
				cur = expect;
			}
		}
		if (cur == ra) {
			__atomic_add_fetch(&slot_bytes[h], n, __ATOMIC_RELAXED);
			__atomic_add_fetch(&slot_calls[h], 1, __ATOMIC_RELAXED);
			return;
		}
	}
}

void *memcpy(void *d, const void *s, size_t n)
{
	note((uintptr_t)__builtin_return_address(0), n, 0);
	char *dd = d;
	const char *ss = s;
	if (n >= 64)
		__asm__ volatile("rep movsb" : "+D"(dd), "+S"(ss), "+c"(n) : : "memory");
	else
		while (n--)
			*dd++ = *ss++;
	return d;
}

void *memmove(void *d, const void *s, size_t n)
{
	note((uintptr_t)__builtin_return_address(0), n, 1);
	char *dd = d;
	const char *ss = s;
	if (dd < ss) {
		while (n--)
			*dd++ = *ss++;
	} else {
		dd += n, ss += n;
		while (n--)
			*--dd = *--ss;
	}
	return d;
}

void *memset(void *d, int c, size_t n)
{
	note((uintptr_t)__builtin_return_address(0), n, 2);
	char *dd = d;
	if (n >= 64)
		__asm__ volatile("rep stosb" : "+D"(dd), "+c"(n) : "a"(c) : "memory");
	else
		while (n--)
			*dd++ = (char)c;
	return d;
}

__attribute__((destructor)) static void dump(void)
{
	const char *path = getenv("LIBC_COPIES_OUT"), *m = getenv("LIBC_COPIES_MIN_CALLS");
	unsigned long long min_calls = m ? strtoull(m, NULL, 10) : 1000;
	FILE *f = path ? fopen(path, "a") : NULL;
	if (!f)
		return;
	for (int i = 0; i < SLOTS; i++) {
		if (!slot_addr[i] || (slot_calls[i] < min_calls && slot_bytes[i] < (1ull << 24)))
			continue;
		Dl_info di;
		const char *obj = "?";
		uintptr_t off = slot_addr[i];
		if (dladdr((void *)slot_addr[i], &di) && di.dli_fname) {
			obj = di.dli_fname;
			off = slot_addr[i] - (uintptr_t)di.dli_fbase;
		}
		fprintf(f, "%d %llu %llu %s 0x%lx\n", slot_kind[i], slot_bytes[i], slot_calls[i], obj, (unsigned long)off);
	}
	fclose(f);
}
