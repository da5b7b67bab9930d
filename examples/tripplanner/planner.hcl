# The trip planner, acting for Alice. Every capability is scoped to what
# this trip needs; the payment token carries her intent.
task "trip-planner" {
  module    = "planner"
  principal = "alice"
  limits {
    memory  = "128MiB"
    timeout = "60s"
  }

  seed "itinerary" {
    file = "data/itinerary.json"
  }

  cap "data" "itinerary" {
    collection = "itinerary"
    records    = "own"
    fields     = ["from", "to", "date", "passport"]
  }
  cap "net" "flights" {
    origin        = var.flights
    methods       = ["GET"]
    paths         = ["/search"]
    allow_private = true # the example's fixture sites listen on loopback
  }
  cap "net" "airline" {
    origin        = var.airline
    methods       = ["POST"]
    paths         = ["/book"]
    clearance     = ["pii:alice"] # the one sink the passport may reach
    allow_private = true
  }
  cap "net" "hotels" {
    origin        = var.hotels
    methods       = ["GET"]
    paths         = ["/hotels"]
    allow_private = true
  }
  cap "pay" "card" {
    provider      = var.pay
    allow_private = true
    instrument    = { env = "TRIP_CARD_TOKEN" }
    payees        = ["airline.example"]
    currency      = "USD"
    max_amount    = "800 USD"
    approve_above = "500 USD"
    when          = "offer.duration_hours <= 12 && offer.stops <= 1"
  }
  cap "spawn" "children" {
    modules      = ["finder"]
    max_children = 2
  }
}
