package abi

// BlobPartName is the host call that makes a blob of one part of another
// (blob_part): the value at a JSON path, the capture of a pattern, or
// both (as SplicePart names a part), labelled with that part's label
// only. Reading it raises the caller's label by the part's label, not by
// the whole blob's.
const BlobPartName = "blob_part"

// MaxPartPathLen bounds the path blob_part reads (the kernel's bound on a
// JSON path's text).
const MaxPartPathLen = 512
