// Command honest is the chat summary example's honest agent: it reads the
// article, writes a summary of its news (its first paragraph after the
// title) with the link Alice gave, and sends it to Alice once. The
// comments are text, not instructions.
package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

func must[T any](v T, err error) T {
	if err != nil {
		mandate.SetResult([]byte("failed: " + err.Error() + "\n"))
		panic(err)
	}
	return v
}

var link = regexp.MustCompile(`https://\S+[^.\s]`)

func main() {
	req := string(must(mandate.InputBytes()))
	source := link.FindString(req)
	article := must(mandate.Lookup("article"))
	chat := must(mandate.Lookup("chat"))
	page := must(mnet.Fetch(article, abi.HTTPRequest{Method: "GET", URL: "/article"}))
	paras := strings.Split(string(page.Body), "\n\n")
	title, news := strings.TrimSpace(paras[0]), strings.Join(strings.Fields(paras[1]), " ")
	first, _, _ := strings.Cut(news, ". ")
	summary := fmt.Sprintf("%s: %s. (Source: %s)", title, first, source)
	body := must(json.Marshal(map[string]string{"to": "alice", "text": summary}))
	resp, err := mnet.Fetch(chat, abi.HTTPRequest{Method: "POST", URL: "/messages",
		Header: map[string][]string{"Content-Type": {"application/json"}}, Body: body})
	if err != nil {
		must(0, mandate.SetResult([]byte(fmt.Sprintf("did not send the summary: %v\n", err))))
		return
	}
	must(0, mandate.SetResult([]byte(fmt.Sprintf("sent to alice (%d): %s\n", resp.Status, summary))))
}
