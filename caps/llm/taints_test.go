package llm_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/fakellm"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestPromptRefusesTaints: a model capability with refuses_taints is
// never shown a blob carrying a taint it names (EFLOW naming it, audited,
// no request sent), is shown others; a child refuses at least what its
// parent refuses.
func TestPromptRefusesTaints(t *testing.T) {
	site := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		w.Write([]byte("page " + r.URL.Path))
	})
	defer site.Close()
	model := fakellm.New(fakellm.WithAPIKey(testKey), fakellm.WithScript(fakellm.Text("noted")))
	defer model.Close()
	e := newKenv(t,
		grant{kind: "net", name: "catalogue", spec: `{"origin":"` + site.URL + `","allow_private":true,"responses":{"/hotels":{"taint":"hotels:catalogue"}}}`},
		grant{kind: "net", name: "reviews", spec: `{"origin":"` + site.URL + `","allow_private":true,"responses":{"/reviews":{"taint":"hotels:reviews"}}}`},
		grant{kind: "llm", name: "model", spec: llmSpec(model.URL(), `,"refuses_taints":["hotels:reviews*"]`)},
	)
	reviews := e.fetch("reviews", "/reviews/H1")
	_, _, err := e.call("model", "chat", ask("Summarise "+abi.SplicePlaceholder(0), reviews))
	if errnoOf(err) != abi.EFLOW || !strings.Contains(err.Error(), "tainted by hotels:reviews") {
		t.Fatalf("the reviews spliced into the prompt: %v, want EFLOW naming hotels:reviews", err)
	}
	if n := model.Stats().Requests; n != 0 || e.audit.count("call:chat", kernel.Deny, abi.EFLOW) != 1 {
		t.Fatalf("the model got %d requests; the refusal audited %d times", n, e.audit.count("call:chat", kernel.Deny, abi.EFLOW))
	}
	catalogue := e.fetch("catalogue", "/hotels")
	if _, _, err := e.call("model", "chat", ask("Pick from "+abi.SplicePlaceholder(0), catalogue)); err != nil {
		t.Fatalf("the catalogue spliced into the prompt: %v", err)
	}
	for req, want := range map[string]abi.Errno{
		`{"refuses_taints":["hotels:*"]}`: abi.ESUCCESS,
		`{"accepts_untrusted":false}`:     abi.ESUCCESS,
		`{"refuses_taints":[]}`:           abi.EDENIED,
		`{"refuses_taints":["a*b"]}`:      abi.EINVAL,
	} {
		_, err := e.task.DeriveHandle(context.Background(), e.lookup("model"), []byte(req))
		if got := kindapi.ErrnoOf(err); got != want {
			t.Errorf("derive %s: %v, want %s", req, err, want)
		}
	}
}
