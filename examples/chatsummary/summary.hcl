# "Summarise the article at https://news.example/articles/42 and send the
# summary to Alice in the team chat", written from the request alone: read
# the article, send one message to Alice. The summary is free text written
# from the article, which anyone who can post a comment writes in part; so
# the message may carry no link and no e-mail address that was not in
# what the person asked for (given: the task's input).
task "summarise" {
  module    = var.agent # "honest" or "hijacked": the same manifest for both agents
  principal = "alice"
  limits {
    memory  = "64MiB"
    timeout = "30s"
  }

  # Reading: GET /article. The page is the web's: everything in it is
  # labelled web:news.
  cap "net" "article" {
    origin    = var.site
    methods   = ["GET"]
    paths     = ["/article"]
    responses = {
      "/article" = { taint = "web:news" }
    }
    allow_private = true # the example's site listens on loopback
  }

  # Sending: one message, to Alice, whose links and addresses are all in
  # the request.
  cap "net" "chat" {
    origin   = var.site
    methods  = ["POST"]
    paths    = ["/messages"]
    max_uses = 1
    when = [
      "request.body.to == 'alice'",
      "urls(request.body.text).all(u, given(u))",
      "emails(request.body.text).all(a, given(a))",
    ]
    audit         = true # every decision in the audit log before its effect
    allow_private = true
  }
}
