#include "api/ext/safetensors_format.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <exception>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "varsync/error.hpp"

namespace varsync::safetensors {

namespace {

using json = nlohmann::json;

constexpr std::string_view metadata_key = "__metadata__";

caf::error corrupt(std::string what) {
  return make_error(errc::checkpoint_corrupt,
                    "safetensors: " + std::move(what));
}

// Copies `n` bytes of elements of `width` bytes from little-endian `src` to
// host order in `dst` (or the reverse: the operation is its own inverse).
void copy_le(void* dst, const void* src, size_t n, size_t width) {
  if constexpr (std::endian::native == std::endian::little) {
    if (n > 0)
      std::memcpy(dst, src, n);
  } else {
    auto* d = static_cast<unsigned char*>(dst);
    auto* s = static_cast<const unsigned char*>(src);
    for (size_t i = 0; i + width <= n; i += width)
      for (size_t b = 0; b < width; ++b)
        d[i + b] = s[i + width - 1 - b];
  }
}

// Reads a non-negative integer that fits uint64 from a JSON value.
bool as_u64(const json& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer()) {
    auto v = j.get<int64_t>();
    if (v < 0)
      return false;
    out = static_cast<uint64_t>(v);
    return true;
  }
  return false;
}

struct entry {
  std::string name;
  dtype type;
  tensor_shape shape;
  uint64_t begin;
  uint64_t end;
};

} // namespace

const tensor* decoded_file::find(std::string_view name) const {
  for (auto& t : tensors)
    if (t.name == name)
      return &t.value;
  return nullptr;
}

std::string_view dtype_tag(dtype t) {
  switch (t) {
    case dtype::float16: return "F16";
    case dtype::bfloat16: return "BF16";
    case dtype::float32: return "F32";
    case dtype::float64: return "F64";
    case dtype::int32: return "I32";
    case dtype::int64: return "I64";
  }
  return "?";
}

bool parse_dtype_tag(std::string_view tag, dtype& out) {
  static constexpr dtype all[] = {dtype::float16, dtype::bfloat16,
                                  dtype::float32, dtype::float64,
                                  dtype::int32,   dtype::int64};
  for (auto t : all)
    if (dtype_tag(t) == tag) {
      out = t;
      return true;
    }
  return false;
}

caf::expected<std::string>
encode(const std::vector<named_tensor>& tensors,
       const std::map<std::string, std::string>& metadata) {
  try {
    json header = json::object();
    std::set<std::string> seen;
    uint64_t offset = 0;
    for (auto& t : tensors) {
      if (t.name.empty() || t.name == metadata_key)
        return make_error(errc::invalid_argument,
                          "safetensors: invalid tensor name '" + t.name + "'");
      if (!seen.insert(t.name).second)
        return make_error(errc::invalid_argument,
                          "safetensors: duplicate tensor name '" + t.name
                            + "'");
      auto n = static_cast<uint64_t>(t.value.nbytes());
      header[t.name] = {{"dtype", std::string{dtype_tag(t.value.type())}},
                        {"shape", t.value.shape()},
                        {"data_offsets", {offset, offset + n}}};
      offset += n;
    }
    if (!metadata.empty()) {
      json meta = json::object();
      for (auto& [k, v] : metadata)
        meta[k] = v;
      header[std::string{metadata_key}] = std::move(meta);
    }
    // Strict UTF-8: invalid names or values are an error, not a bad file.
    auto text = header.dump(-1, ' ', false, json::error_handler_t::strict);
    // Pad the header with spaces so that the data section is 8-byte aligned
    // (as the reference implementation does).
    while (text.size() % 8 != 0)
      text.push_back(' ');
    // What decode refuses is never written.
    if (text.size() > max_header_bytes)
      return make_error(errc::invalid_argument,
                        "safetensors: the header of "
                          + std::to_string(text.size())
                          + " bytes exceeds the limit of "
                          + std::to_string(max_header_bytes) + " bytes");
    std::string out;
    out.reserve(8 + text.size() + offset);
    uint64_t n = text.size();
    for (int b = 0; b < 8; ++b)
      out.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
    out += text;
    for (auto& t : tensors) {
      auto pos = out.size();
      out.resize(pos + t.value.nbytes());
      copy_le(out.data() + pos, t.value.raw(), t.value.nbytes(),
              size_of(t.value.type()));
    }
    return out;
  } catch (const std::exception& e) {
    return make_error(errc::invalid_argument,
                      std::string{"safetensors: cannot encode: "} + e.what());
  }
}

namespace {

// The 8-byte length and the JSON object it bounds; data is what follows.
caf::error read_header(std::span<const std::byte> bytes, json& header,
                       std::span<const std::byte>& data) {
  if (bytes.size() < 8)
    return corrupt("file of " + std::to_string(bytes.size())
                   + " bytes is shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int b = 0; b < 8; ++b)
    n |= static_cast<uint64_t>(std::to_integer<unsigned>(bytes[b]))
         << (8 * b);
  if (n > max_header_bytes)
    return corrupt("header length " + std::to_string(n)
                   + " exceeds the limit of "
                   + std::to_string(max_header_bytes) + " bytes");
  if (n > bytes.size() - 8)
    return corrupt("header length " + std::to_string(n)
                   + " is larger than the " + std::to_string(bytes.size() - 8)
                   + " bytes after the length field (truncated file?)");
  auto header_bytes = bytes.subspan(8, static_cast<size_t>(n));
  data = bytes.subspan(8 + static_cast<size_t>(n));
  auto* hb = reinterpret_cast<const char*>(header_bytes.data());
  header = json::parse(hb, hb + header_bytes.size(), nullptr, false);
  if (header.is_discarded())
    return corrupt("the header is not valid JSON");
  if (!header.is_object())
    return corrupt("the header is not a JSON object");
  return caf::none;
}

caf::error read_metadata(const json& value,
                         std::map<std::string, std::string>& metadata) {
  if (value.is_null())
    return caf::none;
  if (!value.is_object())
    return corrupt("__metadata__ is not an object");
  for (auto& [k, v] : value.items()) {
    if (!v.is_string())
      return corrupt("__metadata__ value of '" + k + "' is not a string");
    metadata.emplace(k, v.get<std::string>());
  }
  return caf::none;
}

// The extents into e.shape and their product into count; the product must
// fit int64 (checked before any multiplication overflows), whatever the
// order of the extents.
caf::error read_shape(const std::string& what, const json& sh, entry& e,
                      uint64_t& count) {
  if (!sh.is_array())
    return corrupt(what + "shape is not an array");
  constexpr uint64_t max_count =
    static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  count = 1;
  bool empty = false;
  for (auto& d : sh) {
    uint64_t extent = 0;
    if (!as_u64(d, extent) || extent > max_count)
      // Name the offending value's type only: dumping a value nested
      // 100,000 levels deep recurses once per level (a fuzz finding).
      return corrupt(what + "shape has an extent of type "
                     + std::string{d.type_name()}
                     + " that is not a non-negative integer");
    e.shape.push_back(static_cast<int64_t>(extent));
    if (extent == 0) {
      empty = true;
      continue;
    }
    if (count > max_count / extent)
      return corrupt(what + "the element count of shape " + sh.dump()
                     + " overflows");
    count *= extent;
  }
  if (empty)
    count = 0;
  return caf::none;
}

// One tensor's header entry, checked against the data section's size.
caf::error read_entry(const std::string& name, const json& value,
                      size_t data_size, entry& e) {
  auto what = "tensor '" + name + "': ";
  if (!value.is_object())
    return corrupt(what + "entry is not an object");
  auto dt = value.find("dtype");
  auto sh = value.find("shape");
  auto off = value.find("data_offsets");
  if (dt == value.end() || sh == value.end() || off == value.end())
    return corrupt(what + "needs dtype, shape and data_offsets");
  e = entry{name, dtype::float32, {}, 0, 0};
  if (!dt->is_string())
    return corrupt(what + "dtype is not a string");
  if (!parse_dtype_tag(dt->get<std::string>(), e.type))
    return corrupt(what + "unsupported dtype '" + dt->get<std::string>()
                   + "'");
  uint64_t count = 0;
  if (auto err = read_shape(what, *sh, e, count))
    return err;
  if (!off->is_array() || off->size() != 2 || !as_u64((*off)[0], e.begin)
      || !as_u64((*off)[1], e.end))
    return corrupt(what + "data_offsets is not [begin, end]");
  if (e.begin > e.end || e.end > data_size)
    return corrupt(what + "data_offsets " + off->dump()
                   + " out of range of the "
                   + std::to_string(data_size) + "-byte data section");
  auto width = size_of(e.type);
  if (count > data_size / width || count * width != e.end - e.begin)
    return corrupt(what + std::string{dtype_tag(e.type)} + " shape "
                   + sh->dump() + " does not match the "
                   + std::to_string(e.end - e.begin)
                   + " bytes of data_offsets " + off->dump());
  return caf::none;
}

// Sorts the entries by offset; they must tile the data section exactly.
caf::error check_tiling(std::vector<entry>& entries, size_t data_size) {
  std::sort(entries.begin(), entries.end(),
            [](const entry& a, const entry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t expected_begin = 0;
  for (auto& e : entries) {
    if (e.begin != expected_begin)
      return corrupt("tensor '" + e.name + "': data_offsets begin at "
                     + std::to_string(e.begin) + ", expected "
                     + std::to_string(expected_begin)
                     + " (overlapping or non-contiguous tensors)");
    expected_begin = e.end;
  }
  if (expected_begin != data_size)
    return corrupt("the tensors cover " + std::to_string(expected_begin)
                   + " bytes but the data section has "
                   + std::to_string(data_size));
  return caf::none;
}

} // namespace

caf::expected<decoded_file> decode(std::span<const std::byte> bytes) {
  try {
    json header;
    std::span<const std::byte> data;
    if (auto err = read_header(bytes, header, data))
      return err;
    decoded_file out;
    std::vector<entry> entries;
    for (auto& [name, value] : header.items()) {
      if (name == metadata_key) {
        if (auto err = read_metadata(value, out.metadata))
          return err;
        continue;
      }
      entry e;
      if (auto err = read_entry(name, value, data.size(), e))
        return err;
      entries.push_back(std::move(e));
    }
    if (auto err = check_tiling(entries, data.size()))
      return err;
    out.tensors.reserve(entries.size());
    for (auto& e : entries) {
      auto t = tensor::empty(e.type, e.shape);
      copy_le(t.mutable_raw(), data.data() + e.begin,
              static_cast<size_t>(e.end - e.begin), size_of(e.type));
      out.tensors.push_back({std::move(e.name), std::move(t)});
    }
    return out;
  } catch (const std::exception& e) {
    return corrupt(std::string{"cannot decode: "} + e.what());
  } catch (...) {
    return corrupt("cannot decode");
  }
}

caf::expected<decoded_file> decode(const std::string& bytes) {
  return decode(std::span<const std::byte>{
    reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()});
}

} // namespace varsync::safetensors
