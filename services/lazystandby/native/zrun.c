/* One call that compresses a whole run of backup batches, each a zstd block of its own (lazystandby.native).

   Batch i is heads[i*head_size:(i+1)*head_size] followed by data[cuts[i]-cuts[0]:cuts[i+1]-cuts[0]]. Each is
   copied next to the one before from `scratch` on, in the caller's window buffer, and compressed with
   ZSTD_compressContinue, which emits it as complete blocks: the bytes a streaming context flushed after
   each batch (ZSTD_e_flush; python-zstandard's compressobj with COMPRESSOBJ_FLUSH_BLOCK) writes, so each
   batch decodes on arrival after the ones before it. A streaming context copies each batch into a window
   buffer of its own and cuts it there, which took a fifth more CPU per Bsize-10 batch (2.07 against
   1.68 us, libzstd 1.5.4). zstd's buffer-less API reads its history where it lies: the caller's buffer
   holds the dictionary and the runs before, back to back (native.RunCompressor).

   libzstd's functions come in as pointers (ctypes finds them in libzstd.so.1): this file needs no zstd
   header and links to nothing, so a C compiler is all it takes to build. */
#include <stddef.h>
#include <string.h>

typedef size_t (*compress_continue_fn)(void* cctx, void* dst, size_t cap, const void* src, size_t size);
typedef unsigned (*is_error_fn)(size_t code);

/* Returns the bytes written to dst (out_sizes[i]: batch i's share; the first also holds the frame's header
   when the context has written nothing yet), -1 when zstd reports an error (a dst too small among them). */
long long ls_compress_run(compress_continue_fn compress_continue, is_error_fn is_error, void* cctx,
                          const char* heads, long long head_size, const char* data, const long long* cuts,
                          long long count, char* scratch, char* dst, long long cap, long long* out_sizes) {
  size_t done = 0, at = 0;
  for (long long i = 0; i < count; i++) {
    size_t body = (size_t)(cuts[i + 1] - cuts[i]);
    char* batch = scratch + at;
    memcpy(batch, heads + i * head_size, (size_t)head_size);
    memcpy(batch + head_size, data + (cuts[i] - cuts[0]), body);
    size_t size = (size_t)head_size + body;
    size_t written = compress_continue(cctx, dst + done, (size_t)cap - done, batch, size);
    if (is_error(written)) return -1;
    done += written;
    at += size;
    out_sizes[i] = (long long)written;
  }
  return (long long)done;
}
