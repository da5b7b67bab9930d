package kernel

import (
	"context"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// Reading a part of a blob (blob_part).
//
// A task that reads a blob is raised by its whole label, every part's
// (law 6): reading a channel's list of names would taint it with every
// message. blob_part makes a new blob of one part of a blob the task
// holds, named as a spliced part is (abi.SplicePart: a JSON path, a
// pattern over a text, or both), labelled with that part's label only
// (kindapi.Blob.Part); reading it raises the task by that label, not the
// whole blob's. Making it reads nothing, except that a pattern's outcome
// tells the task whether the text matched: a pattern raises the task by
// the text's confidentiality tags, as a pattern spliced into a call does.
//
// The part of a blob the task wrote is written too: splicing it proves
// nothing about where its value came from (Source.Written).

// blobPartCall: blob_part makes a blob of one part of a blob.
var blobPartCall = HostCall{
	Name: abi.BlobPartName,
	Params: []sandbox.Param{handle("h"), in("path_ptr", abi.MaxPartPathLen), length("path_len"),
		in("pattern_ptr", abi.MaxPatternLen), length("pattern_len"), out("out_handle_ptr")},
	Errnos: []ErrnoCase{
		badHandle,
		notABlob,
		{abi.EINVAL, "neither a path nor a pattern; the path does not parse or names no value (or the blob is not " +
			"a JSON document); a pattern that does not compile, has other than one capture group, reads a value " +
			"that is not a string, matches nothing or more than once, or captures invalid UTF-8."},
		{abi.ELIMIT, "`path_len` > 512 or `pattern_len` > 256; the pattern's program, or its size times the " +
			"text's, is over its bound; the text is over 1 MiB; the table is full."},
		{abi.EFAULT, "the path, the pattern or the out pointer is out of bounds."},
	},
	fn: hostBlobPart,
}

func hostBlobPart(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	path, e := viewGuest(mem, u32(p[1]), u32(p[2]), abi.MaxPartPathLen)
	if e != abi.ESUCCESS {
		return faulted(t, abi.BlobPartName, e)
	}
	pattern, e := viewGuest(mem, u32(p[3]), u32(p[4]), abi.MaxPatternLen)
	if e != abi.ESUCCESS {
		return faulted(t, abi.BlobPartName, e)
	}
	if !outOK(mem, u32(p[5])) {
		return faulted(t, abi.BlobPartName, abi.EFAULT)
	}
	h, err := t.BlobPart(ctx, abi.Handle(u32(p[0])), string(path), string(pattern))
	if err != nil {
		return kindapi.ErrnoOf(err)
	}
	return putHandle(ctx, t, mem, u32(p[5]), h)
}

// BlobPart makes a blob of the part of blob h that path and pattern name
// (kindapi.Blob.Part), labelled with that part's label, and returns its
// handle. It does not raise the task's label, except by the
// confidentiality tags of a text a pattern scanned.
func (t *Task) BlobPart(ctx context.Context, h abi.Handle, path, pattern string) (abi.Handle, error) {
	b, err := t.table.GetBlob(h)
	if err != nil {
		return 0, t.deny(ctx, nil, abi.BlobPartName, err)
	}
	part, revealed, err := b.Part(path, pattern)
	t.raise(revealed)
	if err != nil {
		return 0, t.fail(abi.BlobPartName, err)
	}
	nh, err := t.hold(part)
	if err != nil {
		return 0, t.refuse(ctx, nil, abi.BlobPartName, err)
	}
	return nh, nil
}
