#include "base/utf8.h"

namespace tern {

void AppendUtf8(uint32_t cpt, std::string* out) {
  if ((cpt >= 0xD800 && cpt <= 0xDFFF) || cpt > 0x10FFFF) cpt = 0xFFFD;
  if (cpt < 0x80) {
    out->push_back((char)cpt);
  } else if (cpt < 0x800) {
    out->push_back((char)(0xC0 | (cpt >> 6)));
    out->push_back((char)(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out->push_back((char)(0xE0 | (cpt >> 12)));
    out->push_back((char)(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back((char)(0x80 | (cpt & 0x3F)));
  } else {
    out->push_back((char)(0xF0 | (cpt >> 18)));
    out->push_back((char)(0x80 | ((cpt >> 12) & 0x3F)));
    out->push_back((char)(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back((char)(0x80 | (cpt & 0x3F)));
  }
}

}  // namespace tern
