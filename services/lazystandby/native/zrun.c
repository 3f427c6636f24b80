/* One call that compresses a whole run of backup batches (lazystandby.native): each flushed in one stream
   (ls_compress_run, the streaming codecs) or each a zstd frame of its own (ls_compress_frames, zstd and
   zstd-dict).

   Batch i is heads[i*head_size:(i+1)*head_size] followed by data[cuts[i]-cuts[0]:cuts[i+1]-cuts[0]]; each
   is fed to the same zstd context in turn.

   libzstd's functions come in as pointers (ctypes finds them in libzstd.so.1): this file needs no zstd
   header and links to nothing, so a C compiler is all it takes to build. The structs below are zstd's
   ZSTD_inBuffer and ZSTD_outBuffer, stable since zstd 1.3; ZSTD_compressStream2 since 1.4. */
#include <stddef.h>

typedef struct { const void* src; size_t size; size_t pos; } in_buffer;
typedef struct { void* dst; size_t size; size_t pos; } out_buffer;
typedef size_t (*compress_stream2_fn)(void* cctx, out_buffer* out, in_buffer* in, int end_op);
typedef unsigned (*is_error_fn)(size_t code);
typedef size_t (*set_pledged_fn)(void* cctx, unsigned long long size);

enum { E_CONTINUE = 0, E_FLUSH = 1, E_END = 2 };

/* Batch i fed to the context and ended with `end_op` (E_FLUSH or E_END); with `set_pledged`, its size
   pledged first. Returns the bytes written to dst (out_sizes[i]: batch i's share), -1 when zstd reports an
   error, -2 when dst is too small, -3 when the pledge is refused. */
static long long compress_batches(compress_stream2_fn compress_stream2, is_error_fn is_error,
                                  set_pledged_fn set_pledged, int end_op, void* cctx, const char* heads,
                                  long long head_size, const char* data, const long long* cuts, long long count,
                                  char* dst, long long cap, long long* out_sizes) {
  size_t done = 0;
  for (long long i = 0; i < count; i++) {
    out_buffer out = {dst + done, (size_t)cap - done, 0};
    in_buffer head = {heads + i * head_size, (size_t)head_size, 0};
    in_buffer body = {data + (cuts[i] - cuts[0]), (size_t)(cuts[i + 1] - cuts[i]), 0};
    size_t left;
    if (set_pledged && is_error(set_pledged(cctx, (unsigned long long)(head.size + body.size)))) return -3;
    while (head.pos < head.size) {
      left = compress_stream2(cctx, &out, &head, E_CONTINUE);
      if (is_error(left)) return -1;
      if (out.pos == out.size) return -2;
    }
    do {
      left = compress_stream2(cctx, &out, &body, end_op);
      if (is_error(left)) return -1;
      if (left != 0 && out.pos == out.size) return -2;
    } while (left != 0);
    done += out.pos;
    out_sizes[i] = (long long)out.pos;
  }
  return (long long)done;
}

/* Every batch flushed in one stream (ZSTD_e_flush), as compressobj's compress(batch) +
   flush(COMPRESSOBJ_FLUSH_BLOCK): each decodes on arrival after the ones before it. */
long long ls_compress_run(compress_stream2_fn compress_stream2, is_error_fn is_error, void* cctx,
                          const char* heads, long long head_size, const char* data, const long long* cuts,
                          long long count, char* dst, long long cap, long long* out_sizes) {
  return compress_batches(compress_stream2, is_error, 0, E_FLUSH, cctx, heads, head_size, data, cuts, count, dst,
                          cap, out_sizes);
}

/* Every batch a zstd frame of its own (ZSTD_e_end), its size pledged so that the frame's header carries it,
   as python-zstandard's ZstdCompressor.compress(batch) writes it: each batch decodes alone. */
long long ls_compress_frames(compress_stream2_fn compress_stream2, is_error_fn is_error, set_pledged_fn set_pledged,
                             void* cctx, const char* heads, long long head_size, const char* data,
                             const long long* cuts, long long count, char* dst, long long cap,
                             long long* out_sizes) {
  return compress_batches(compress_stream2, is_error, set_pledged, E_END, cctx, heads, head_size, data, cuts, count,
                          dst, cap, out_sizes);
}
