# "Pay the bill in bill.txt", for Alice, written from the request and the
# two facts on the bill a person checks before paying anything: who and
# how much. The bill is the task's input (--input data/bill.txt); Alice
# copies its payee and amount into the command (--var payee=... --var
# amount=...). The kernel does not label a task's input, so "spliced from
# the bill" would prove nothing here (an agent can make a blob of any
# text and splice from that): the values she read are the binding.
task "pay-bill" {
  module    = var.agent # "honest" or "hijacked": the same manifest for both agents
  principal = "alice"
  limits {
    memory  = "64MiB"
    timeout = "30s"
  }

  # The only capability: one payment, of the bill, to the bill's payee.
  # No GET (nothing to read at the bank), no /transactions, no /password.
  cap "net" "payments" {
    origin   = var.bank
    methods  = ["POST"]
    paths    = ["/payments"]
    max_uses = 1 # one payment, whatever else happens (refused calls are not uses)
    when = [
      "request.body.recipient == '${var.payee}'", # the payee on the bill, as Alice read it
      "request.body.amount == ${var.amount}",     # the amount due, exactly
    ]
    approve_when = "request.body.amount > 50.0" # Alice says yes to any payment over 50.00 herself
    # The bank's confirmation is the bank's: named, so the answer that
    # quotes it says so ("this answer was influenced by bank:payments").
    responses = {
      "/payments" = { taint = "bank:payments" }
    }
    audit         = true # every decision in the audit log before its effect
    allow_private = true # the example's bank listens on loopback
  }
}
