"""The phone: calls the agents place (`calls`), calls that come in through Twilio (`calls_in`),
and the menu a caller hears (`menu`)."""
