#pragma once
// The one place that parses a checkpoint with libhdf5 (internal to io/; checkpoint.h is the
// public map). It runs in a forked child (read_child.h) so that a crash or a hang of the
// library on a hostile file costs the child, not the program; what it finds goes to a
// ReadSink (read_protocol.h), section by section as their layouts describe them: in the
// child, one that sends it to the parent over a pipe; in the parent (and when the child is
// skipped), the CheckpointBuilder that assembles it.
//
// Before any data is read, every link of every group is checked to be a hard link and every
// dataset to keep its data in the file (no external storage, no virtual layout, no filter
// but deflate, shuffle and Fletcher32) and to store what it declares, so a file can neither
// point outside itself nor make the reader allocate far more than its size.
#include <string>
#include <string_view>

#include "base/utf8.h"
#include "io/read_protocol.h"

namespace io::detail {

// Reads bytes as the checkpoint `source` (the name its messages use) and tells sink what it
// finds, ending with done(). Problems with the file go to the sink, not out as exceptions.
void read_checkpoint_image(std::string_view bytes, const std::string& source, ReadRequest request,
                           ReadSink& sink);

// Text from a file, safe to put in a message: base's one escaping (base/utf8.h), which every
// message of io/ uses.
using base::printable;

}  // namespace io::detail
