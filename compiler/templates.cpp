#include "compiler/templates.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace flashjit {

uint64_t templates_hash() {
  static const uint64_t hash = [] {
    XXH64_state_t* state = XXH64_createState();
    XXH64_reset(state, 0);
    for (const EmbeddedTemplate& t : embedded_templates()) {
      XXH64_update(state, t.name, std::char_traits<char>::length(t.name) + 1);  // with the NUL
      XXH64_update(state, t.data, t.size);
    }
    const uint64_t h = XXH64_digest(state);
    XXH64_freeState(state);
    return h;
  }();
  return hash;
}

}  // namespace flashjit
