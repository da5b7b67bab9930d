// Package llm gives Mandate guests a language model through an llm
// capability: the kernel sends the request to the one endpoint the
// capability names, with the key it holds (the guest never sees it),
// after checking that everything in the prompt may be shown to that
// provider. The answer comes back as a blob labelled with what the model
// was shown and tainted by the model.
//
//	model, _ := mandate.Lookup("model") // the manifest's cap name
//	resp, err := llm.Chat(model, abi.ChatRequest{Messages: []abi.ChatMessage{
//		{Role: "user", Content: "Summarise: " + abi.SplicePlaceholder(0)},
//	}, Splice: []abi.Handle{page.Handle()}}) // the model reads the page; this task does not
//
// Extract asks for an answer the kernel validates against a closed JSON
// Schema (booleans, bounded numbers, enums) and endorses: it comes back
// without integrity taints, since nothing in it can be phrased by
// whoever wrote what the model read.
//
// Reading an answer raises this task's label to the answer's; ChatBlob
// returns it unread, to pass on.
package llm

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Chat asks the model on capability c and decodes its answer (reading
// it).
func Chat(c mandate.Cap, req abi.ChatRequest) (abi.ChatResponse, error) {
	return call(c, abi.LLMChatOp, req)
}

// Extract asks the model for an answer matching the closed schema in
// req.ResponseFormat and decodes it; the kernel validated and endorsed
// it.
func Extract(c mandate.Cap, req abi.ChatRequest) (abi.ChatResponse, error) {
	return call(c, abi.LLMExtractOp, req)
}

// ChatBlob asks the model and returns its answer unread.
func ChatBlob(c mandate.Cap, op string, req abi.ChatRequest) (mandate.Blob, error) {
	args, err := json.Marshal(req)
	if err != nil {
		return mandate.Blob{}, err
	}
	return c.Call(op, args)
}

func call(c mandate.Cap, op string, req abi.ChatRequest) (abi.ChatResponse, error) {
	b, err := ChatBlob(c, op, req)
	if err != nil {
		return abi.ChatResponse{}, err
	}
	defer b.Drop()
	data, err := b.Bytes()
	if err != nil {
		return abi.ChatResponse{}, err
	}
	var resp abi.ChatResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return abi.ChatResponse{}, err
	}
	return resp, nil
}
