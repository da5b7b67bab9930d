# "Recommend me a hotel in Lisbon", for Alice: an LLM agent reads the
# hotel catalogue (which the site's staff write) and may read the guests'
# reviews (which anyone can write). Its answer may be built from the
# catalogue, never from the reviews: an answer carrying their taint is
# refused (EFLOW, naming it), whatever the model was told to say.
task "hotel-pick" {
  module    = "agent"
  principal = "alice"
  limits {
    memory  = "64MiB"
    timeout = "60s"
  }

  cap "llm" "model" {
    endpoint      = var.model
    models        = [var.model_name]
    api_key       = { env = "HOTELPICK_MODEL_KEY" }
    max_tokens    = 512
    budget        = "50k"
    allow_private = true # the example's model listens on loopback
  }
  # The catalogue: trusted, its answers carry hotels:catalogue.
  cap "net" "catalogue" {
    origin        = var.site
    methods       = ["GET"]
    paths         = ["/hotels"]
    responses     = { "/hotels" = { taint = "hotels:catalogue" } }
    allow_private = true
  }
  # The reviews: anyone's text, their answers carry hotels:reviews.
  cap "net" "reviews" {
    origin        = var.site
    methods       = ["GET"]
    paths         = ["/reviews/"]
    responses     = { "/reviews/" = { taint = "hotels:reviews" } }
    allow_private = true
  }

  # The answer accepts the catalogue's taint and the model's, and refuses
  # the reviews': accepts_untrusted = false would refuse every answer,
  # since every one carries the catalogue's taint.
  result {
    refuses_taints = ["hotels:reviews*"]
  }
}
