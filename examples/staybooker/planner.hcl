# Alice's stay booker: an LLM agent that finds and books a stay in Lisbon.
# The model is reached only through the llm capabilities; each listing is
# read by a child that holds only that listing's page and a quarantined
# model; the passport goes to the booking API and nowhere else.
task "stay-booker" {
  module    = "planner"
  principal = "alice"
  limits {
    memory  = "128MiB"
    timeout = "120s"
  }

  seed "profile" {
    file = "data/profile.json"
  }

  # The planner's model: cleared for public data only (the default).
  cap "llm" "model" {
    endpoint      = var.model
    models        = [var.model_name]
    api_key       = { env = "STAY_MODEL_KEY" }
    max_tokens    = 1024
    budget        = "200k"
    allow_private = true # the example's model listens on loopback
  }
  # The readers' model: answers only closed schemas, endorsed.
  cap "llm" "reader_model" {
    endpoint       = var.reader_model
    models         = [var.reader_model_name]
    api_key        = { env = "STAY_MODEL_KEY" }
    max_tokens     = 256
    budget         = "50k"
    endorse_schema = true
    allow_private  = true
  }
  cap "net" "listings" {
    origin        = var.listings
    methods       = ["GET"]
    paths         = ["/search", "/listing/"]
    allow_private = true
  }
  cap "data" "profile" {
    collection = "profile"
    records    = "own"
    fields     = ["name", "passport"]
  }
  # Alice's intent, in the kernel: one booking, 3 nights, at most 150 a night.
  cap "net" "booking" {
    origin        = var.booking
    methods       = ["POST"]
    paths         = ["/book"]
    clearance     = ["pii:alice"] # the one place the passport may go
    max_uses      = 1
    when          = "request.body.nights == 3 && request.body.price_per_night <= 150"
    audit         = true
    allow_private = true
  }
  cap "spawn" "readers" {
    modules      = ["reader"]
    max_children = 4
  }
}
