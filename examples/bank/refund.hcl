# "Refund the friend who sent me 10.00", for Alice, written from the
# request alone: read the transactions of 10.00, pay 10.00 back, once, to
# the account the bank says it came from. Which account that is, Alice
# does not know and does not type: the recipient must be spliced by the
# kernel from the bank's own record of the sender, never typed by the
# agent, and nothing the senders typed (the subjects) may reach the
# payment.
task "refund" {
  module    = var.agent # "honest" or "hijacked": the same manifest for both agents
  principal = "alice"
  limits {
    memory  = "64MiB"
    timeout = "30s"
  }

  # Reading: GET /transactions, of 10.00 only (the bank filters).
  cap "net" "transactions" {
    origin  = var.bank
    methods = ["GET"]
    paths   = ["/transactions"]
    when    = "request.query.amount == '10.00'" # the transactions the request is about, no others
    # Trust within one response: the bank writes the sender of a
    # transaction, the sender writes its subject. The sender field is
    # labelled bank:transactions.sender; the rest of the response
    # (subjects above all) bank:tx.
    responses = {
      "/transactions" = {
        taint  = "bank:tx"
        fields = { "$.transactions[*].sender" = "bank:transactions.sender" }
      }
    }
    allow_private = true # the example's bank listens on loopback
  }

  # Paying: one POST /payments of at most 10.00, to a spliced sender.
  cap "net" "payments" {
    origin   = var.bank
    methods  = ["POST"]
    paths    = ["/payments"]
    max_uses = 1 # once (refused calls are not uses)
    when = [
      # The recipient was spliced by the kernel from a part labelled
      # bank:transactions.sender: the bank's sender field, of a
      # transaction of 10.00 (the only ones the task can fetch). A typed
      # IBAN, even the right one, is not spliced. "in", not "==": the
      # part also carries whatever the task had read before fetching.
      "spliced(request.body.recipient) && 'bank:transactions.sender' in from(request.body.recipient).integ",
      "request.body.amount > 0.0 && request.body.amount <= 10.0", # at most what was received
    ]
    # A sink refusing the senders' free text: a task that read a subject,
    # or a spliced part carrying one, is refused (EFLOW) before anything
    # is sent; so is anything from the web.
    refuses_taints = ["bank:tx", "web:*"]
    responses = {
      "/payments" = { taint = "bank:payments" }
    }
    audit         = true # every decision in the audit log before its effect
    allow_private = true
  }
}
