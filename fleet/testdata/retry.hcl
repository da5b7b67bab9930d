# A run the fleet may run again when its node is lost: a charge keyed by
# the run, and a GET. (TestFleetRetry.)
task "pay-fetch" {
  module    = "pay-fetch"
  principal = "alice"
  retry     = 1

  cap "pay" "card" {
    provider      = var.pay
    allow_private = true
    instrument    = { env = "FLEET_TEST_CARD" }
    payees        = ["shop.example"]
    currency      = "USD"
    max_amount    = "20 USD"
  }
  cap "net" "shop" {
    origin        = var.shop
    methods       = ["GET"]
    paths         = ["/status"]
    allow_private = true
  }
}
