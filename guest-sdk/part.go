package mandate

import "github.com/mandatevm/mandate/guest-sdk/abi"

// Part makes a blob of one part of b (blob_part): the JSON value at path
// ("$.channels[*]" is not one value: "$.channels[0].name" is), the
// capture of pattern (a regular expression with one capture group, RE2
// syntax) in the string at path, or with path "" in b's text (its bytes;
// a fetched response's body). The part is a JSON value (a pattern's
// capture, a JSON string) labelled with that part's label only: reading
// it raises this task's label by the part's label, not by the whole
// blob's. A pattern must match exactly once (EINVAL otherwise); its
// outcome raises this task by the text's confidentiality tags.
//
//	names, _ := resp.Part("$.channels", "")                        // the list, not the messages
//	iban, _ := bill.Part("", `(?m)^Pay to:\s+([A-Z0-9]+)$`)         // "GB33BUKB20201555555555"
func (b Blob) Part(path, pattern string) (Blob, error) {
	if e := blobPart(uint32(b.h), strptr(path), uint32(len(path)), strptr(pattern), uint32(len(pattern)), &scratch); e != abi.ESUCCESS {
		return Blob{}, fail(abi.BlobPartName, e)
	}
	return Blob{abi.Handle(scratch)}, nil
}

// ReadPart reads one part of b (Part, then its bytes, then drops it): the
// part's JSON value, raising this task's label by the part's label only.
func (b Blob) ReadPart(path, pattern string) ([]byte, error) {
	p, err := b.Part(path, pattern)
	if err != nil {
		return nil, err
	}
	defer p.Drop()
	return p.Bytes()
}
