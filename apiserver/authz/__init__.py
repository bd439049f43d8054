"""Authorization: may this user do this verb on this resource (or path)?  See `interface`."""
