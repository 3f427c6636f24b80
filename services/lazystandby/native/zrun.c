/* One call that compresses a whole run of backup batches, each flushed on its own (lazystandby.native).

   Batch i is heads[i*head_size:(i+1)*head_size] followed by data[cuts[i]-cuts[0]:cuts[i+1]-cuts[0]]; each
   is fed to the same zstd streaming context and flushed (ZSTD_e_flush), as python-zstandard's compressobj
   does with compress(batch) + flush(COMPRESSOBJ_FLUSH_BLOCK): each batch decodes on arrival after the ones
   before it.

   libzstd's functions come in as pointers (ctypes finds them in libzstd.so.1): this file needs no zstd
   header and links to nothing, so a C compiler is all it takes to build. The structs below are zstd's
   ZSTD_inBuffer and ZSTD_outBuffer, stable since zstd 1.3; ZSTD_compressStream2 since 1.4. */
#include <stddef.h>

typedef struct { const void* src; size_t size; size_t pos; } in_buffer;
typedef struct { void* dst; size_t size; size_t pos; } out_buffer;
typedef size_t (*compress_stream2_fn)(void* cctx, out_buffer* out, in_buffer* in, int end_op);
typedef unsigned (*is_error_fn)(size_t code);

enum { E_CONTINUE = 0, E_FLUSH = 1 };

/* Returns the bytes written to dst (out_sizes[i]: batch i's share), -1 when zstd reports an error,
   -2 when dst is too small. */
long long ls_compress_run(compress_stream2_fn compress_stream2, is_error_fn is_error, void* cctx,
                          const char* heads, long long head_size, const char* data, const long long* cuts,
                          long long count, char* dst, long long cap, long long* out_sizes) {
  size_t done = 0;
  for (long long i = 0; i < count; i++) {
    out_buffer out = {dst + done, (size_t)cap - done, 0};
    in_buffer head = {heads + i * head_size, (size_t)head_size, 0};
    in_buffer body = {data + (cuts[i] - cuts[0]), (size_t)(cuts[i + 1] - cuts[i]), 0};
    size_t left;
    while (head.pos < head.size) {
      left = compress_stream2(cctx, &out, &head, E_CONTINUE);
      if (is_error(left)) return -1;
      if (out.pos == out.size) return -2;
    }
    do {
      left = compress_stream2(cctx, &out, &body, E_FLUSH);
      if (is_error(left)) return -1;
      if (left != 0 && out.pos == out.size) return -2;
    } while (left != 0);
    done += out.pos;
    out_sizes[i] = (long long)out.pos;
  }
  return (long long)done;
}
