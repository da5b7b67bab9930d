# "Pay the bill LPW-2026-1107 from my e-bills", for Alice. The bill is at
# her bank (GET /bills/...), as its biller wrote it, small print included.
# Alice types the amount she checked; who is paid is the bill's "Pay to:"
# line, which she does not type: the kernel splices it from the bill by a
# pattern, and the payment capability requires exactly that (the bill's
# label, and the pattern, so no other line of the bill, such as its small
# print, can be the recipient).
task "pay-ebill" {
  module    = var.agent # "honest" or "hijacked": the same manifest for both agents
  principal = "alice"
  limits {
    memory  = "64MiB"
    timeout = "30s"
  }

  # Reading the e-bills: GET only. The bill is the bank's delivery of
  # the biller's text: labelled bank:bill.
  cap "net" "bills" {
    origin  = var.bank
    methods = ["GET"]
    paths   = ["/bills"]
    responses = {
      "/bills" = { taint = "bank:bill" }
    }
    allow_private = true # the example's bank listens on loopback
  }

  # Paying: one POST /payments, of the amount Alice typed, to the bill's
  # "Pay to:" line, spliced by the kernel.
  cap "net" "payments" {
    origin   = var.bank
    methods  = ["POST"]
    paths    = ["/payments"]
    max_uses = 1 # one payment, whatever else happens (refused calls are not uses)
    when = [
      # The recipient was spliced by the kernel from a bill it fetched (a
      # blob the task wrote itself, even after reading the bill, is not
      # spliced), by the pattern of the "Pay to:" line, which must match
      # the bill exactly once.
      "spliced(request.body.recipient) && 'bank:bill' in from(request.body.recipient).integ",
      "from(request.body.recipient).pattern == r'(?m)^Pay to:\\s+([A-Z0-9]+)$'",
      "request.body.amount == ${var.amount}", # the amount due, as Alice read it
    ]
    approve_when = "request.body.amount > 50.0" # Alice says yes to any payment over 50.00 herself
    responses = {
      "/payments" = { taint = "bank:payments" }
    }
    audit         = true
    allow_private = true
  }
}
