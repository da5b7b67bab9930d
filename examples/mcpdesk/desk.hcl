# Alice's desk over MCP: `mandate mcp serve desk.hcl` offers these four
# tools to an MCP client (Claude Desktop, VS Code, ...), each call a fresh
# WebAssembly task holding only its tool's capabilities. What the client's
# model is shown raises the session's label: once it has read Alice's
# benefits record (pii:alice), web_search, whose sink is public, is
# refused (EFLOW) and listed unavailable, while the mail API and the
# clinic's payments, cleared for pii:alice, still work, within their
# bounds.
#
#   mandate mcp serve desk.hcl --var search=https://search.example \
#     --var mail=https://mail.example --var pay=https://pay.example/v1
#
# with DESK_MAIL_KEY (the mail API's key) and DESK_CARD_TOKEN (the card)
# in the server's environment; the tools never see either. `go run
# ./examples/mcpdesk` serves it against loopback fixtures and plays a
# session. allow_private = true is there for those fixtures: drop it for
# public origins.
session {
  principal = "alice"
  clearance = ["pii:alice"] # the most the client's model may ever be shown

  seed "benefits" {
    file = "data/benefits.json"
  }
}

tool "my_benefits" {
  module       = "tools/benefits"
  description  = "Your own benefits record: plan, dental, vision and the deductible left."
  input_schema = { type = "object", properties = {}, additionalProperties = false }

  cap "data" "benefits" {
    collection = "benefits"
    records    = "own" # the principal's own record, whoever asks for what
    fields     = ["plan", "dental", "vision", "deductible_left"] # never the ssn
    ops        = ["query"]
  }
}

tool "web_search" {
  module      = "tools/search"
  description = "Search the public web."
  input_schema = {
    type                 = "object"
    properties           = { q = { type = "string", description = "what to search for" } }
    required             = ["q"]
    additionalProperties = false
  }

  cap "net" "web" {
    origin        = var.search
    methods       = ["GET"]
    paths         = ["/search"]
    allow_private = true
    # no clearance: a public sink, so nothing labelled pii:alice may reach it
  }
}

tool "send_email" {
  module      = "tools/email"
  description = "Send an email to yourself (alice@example.com)."
  input_schema = {
    type = "object"
    properties = {
      to      = { type = "string" }
      subject = { type = "string" }
      text    = { type = "string" }
    }
    required             = ["to", "subject", "text"]
    additionalProperties = false
  }

  cap "net" "mail" {
    origin        = var.mail
    methods       = ["POST"]
    paths         = ["/send"]
    clearance     = ["pii:alice"] # Alice's data may go to her own mailbox
    when          = "request.body.to == 'alice@example.com'" # and only there
    headers       = [{ name = "Authorization", env = "DESK_MAIL_KEY", prefix = "Bearer " }]
    allow_private = true
  }
}

tool "book_appointment" {
  module      = "tools/book"
  description = "Book a slot at Smile Dental, paying its price (USD) with your card."
  input_schema = {
    type = "object"
    properties = {
      service = { type = "string" }
      slot    = { type = "string", description = "e.g. 2026-07-14 09:30" }
      price   = { type = "string", description = "USD, e.g. 80.00" }
    }
    required             = ["service", "slot", "price"]
    additionalProperties = false
  }

  cap "pay" "card" {
    provider      = var.pay
    allow_private = true
    instrument    = { env = "DESK_CARD_TOKEN" }
    payees        = ["smile-dental.example"]
    currency      = "USD"
    max_amount    = "1000 USD"
    approve_above = "150 USD" # above it, a person's yes: mandate mcp serve --approve yes
    clearance     = ["pii:alice"] # the booking may follow reading her record
  }
}
