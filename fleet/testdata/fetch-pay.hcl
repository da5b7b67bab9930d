# A run whose GET is held while its node's lease expires, then charges.
# (TestPausedNodeActsNoMore.)
task "fetch-pay" {
  module    = "fetch-pay"
  principal = "alice"

  cap "net" "shop" {
    origin        = var.shop
    methods       = ["GET"]
    paths         = ["/status"]
    allow_private = true
  }
  cap "pay" "card" {
    provider      = var.pay
    allow_private = true
    instrument    = { env = "FLEET_TEST_CARD" }
    payees        = ["shop.example"]
    currency      = "USD"
    max_amount    = "20 USD"
  }
}
