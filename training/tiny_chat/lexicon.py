"""Fixed word list used by the tiny chat model's training data and tokenizer."""

from __future__ import annotations

# Words the model learns to copy. Every entry is a lowercase ASCII word; the tokenizer gives each
# one a single token, both bare ("hello") and with a leading space (" hello").
# fmt: off
WORDS: tuple[str, ...] = (
    # required
    "hello", "world", "yes", "no", "ok", "blue", "red", "green", "apple", "banana", "paris",
    "london", "tokyo", "rain", "sunny", "cloudy", "cat", "dog",
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    # numbers and order
    "zero", "eleven", "twelve", "twenty", "hundred", "thousand", "million", "first", "second",
    "third", "last", "next", "half", "double", "single", "many", "few", "more", "less", "most",
    # colours
    "yellow", "orange", "purple", "pink", "brown", "black", "white", "gray", "silver", "gold",
    "violet", "indigo", "cyan", "teal", "beige",
    # weather and nature
    "snow", "wind", "windy", "storm", "cold", "hot", "warm", "cool", "foggy", "rainy", "snowy",
    "sun", "moon", "star", "sky", "cloud", "thunder", "ice", "fire", "water", "earth", "air",
    "river", "lake", "ocean", "sea", "mountain", "hill", "forest", "tree", "flower", "grass",
    "leaf", "rock", "stone", "sand", "beach", "island", "desert", "valley", "field", "garden",
    "spring", "summer", "autumn", "winter", "season", "weather", "climate", "rainbow",
    # animals
    "bird", "fish", "horse", "cow", "pig", "sheep", "goat", "chicken", "duck", "mouse", "rabbit",
    "lion", "tiger", "bear", "wolf", "fox", "deer", "monkey", "elephant", "giraffe", "zebra",
    "snake", "frog", "turtle", "whale", "shark", "dolphin", "owl", "eagle", "bee", "ant",
    "spider", "butterfly", "penguin", "panda", "koala", "camel", "kitten", "puppy",
    # food
    "bread", "cheese", "milk", "butter", "egg", "rice", "pasta", "pizza", "soup", "salad",
    "cake", "cookie", "candy", "sugar", "salt", "pepper", "honey", "jam", "tea", "coffee",
    "juice", "wine", "beer", "cherry", "grape", "lemon", "lime", "mango", "melon", "peach",
    "pear", "plum", "berry", "strawberry", "tomato", "potato", "carrot", "onion", "garlic",
    "corn", "bean", "pea", "nut", "meat", "beef", "pork", "steak", "burger", "sandwich",
    "noodle", "taco", "sushi", "curry", "pie", "chocolate", "vanilla", "cream", "yogurt",
    "breakfast", "lunch", "dinner", "snack", "recipe", "kitchen",
    # places and cities
    "berlin", "madrid", "rome", "vienna", "prague", "dublin", "oslo", "lisbon", "athens",
    "moscow", "cairo", "delhi", "mumbai", "beijing", "shanghai", "seoul", "sydney", "toronto",
    "chicago", "boston", "denver", "dallas", "miami", "seattle", "austin", "phoenix", "lima",
    "bogota", "havana", "nairobi", "lagos", "dubai", "istanbul", "bangkok", "manila", "jakarta",
    "france", "spain", "italy", "japan", "china", "india", "brazil", "canada", "mexico",
    "egypt", "kenya", "peru", "chile", "norway", "sweden", "poland", "greece", "germany",
    "city", "town", "village", "country", "state", "street", "road", "bridge", "park",
    "school", "office", "library", "museum", "hospital", "airport", "station", "market",
    "shop", "store", "bank", "hotel", "restaurant", "cafe", "church", "castle", "tower",
    "house", "home", "room", "door", "window", "wall", "floor", "roof", "bed", "chair",
    "table", "desk", "lamp", "clock", "mirror", "sofa",
    # things
    "book", "page", "letter", "word", "name", "number", "note", "paper", "pen", "pencil",
    "card", "map", "key", "lock", "box", "bag", "cup", "glass", "plate", "bowl", "spoon",
    "fork", "knife", "bottle", "phone", "computer", "screen", "camera", "radio", "music",
    "song", "movie", "film", "game", "ball", "toy", "gift", "ticket", "coin", "money", "price",
    "animal", "fruit", "food", "car", "bus", "train", "plane", "boat", "ship", "bike", "truck",
    "taxi", "rocket", "web",
    "shirt", "shoe", "hat", "coat", "dress", "sock", "ring", "watch", "button", "robot",
    "file", "folder", "image", "photo", "video", "email", "message", "link", "code", "data",
    "text", "list", "report", "order", "account", "password", "user", "team", "project",
    "task", "event", "meeting", "calendar", "reminder", "alarm", "timer", "date", "time",
    "day", "week", "month", "year", "hour", "minute", "morning", "evening", "night", "today",
    "tomorrow", "yesterday", "monday", "tuesday", "wednesday", "thursday", "friday",
    "saturday", "sunday", "january", "march", "april", "june", "july", "august", "october",
    "december", "flight", "trip", "news", "story", "stock", "score", "result", "answer",
    "question", "idea", "plan", "goal", "rule", "test", "level", "size", "color", "shape",
    "sound", "light", "power", "energy", "speed", "distance", "weight", "height", "temperature",
    "location", "address", "query", "topic", "language", "unit", "item", "value", "amount",
    "total", "count", "status", "type", "mode", "volume", "channel", "playlist", "album",
    "artist", "author", "title", "genre", "currency", "dollar", "euro", "yen", "pound",
    # people
    "friend", "family", "mother", "father", "sister", "brother", "baby", "child", "king",
    "queen", "doctor", "teacher", "student", "farmer", "pilot", "chef", "artist", "driver",
    "player", "captain", "guest", "neighbor", "alice", "bob", "carol", "dave", "emma", "frank",
    "grace", "henry", "jack", "kate", "leo", "mia", "noah", "olivia", "sam", "zoe",
    # adjectives
    "big", "small", "tiny", "huge", "long", "short", "tall", "wide", "narrow", "high", "low",
    "fast", "slow", "quick", "early", "late", "new", "old", "young", "good", "bad", "great",
    "happy", "sad", "angry", "calm", "quiet", "loud", "soft", "hard", "easy", "simple",
    "clean", "dirty", "dry", "wet", "fresh", "sweet", "sour", "bitter", "spicy", "salty",
    "bright", "dark", "heavy", "light", "strong", "weak", "rich", "poor", "safe", "free",
    "busy", "lazy", "brave", "kind", "funny", "smart", "lucky", "gentle", "wild", "fancy",
    "open", "closed", "empty", "full", "true", "false", "right", "wrong", "left", "real",
    "local", "public", "private", "daily", "weekly", "ready", "done", "fine", "nice", "perfect",
    # verbs (also used as tool-name verbs)
    "get", "set", "find", "lookup", "search", "check", "send", "create", "delete", "update",
    "add", "remove", "convert", "translate", "fetch", "show", "play", "pause", "stop", "start",
    "book", "cancel", "open", "close", "read", "write", "save", "load", "share", "print",
    "call", "count", "compute", "measure", "predict", "schedule", "track", "rate", "rank",
    "sort", "filter", "move", "copy", "rename", "upload", "download", "buy", "sell", "pay",
    "order", "reserve", "lookup", "list", "describe", "explain", "summarize", "define", "spell",
    "run", "walk", "jump", "swim", "fly", "drive", "ride", "climb", "dance", "sing", "draw",
    "paint", "cook", "bake", "eat", "drink", "sleep", "dream", "laugh", "smile", "cry",
    "learn", "teach", "build", "fix", "clean", "wash", "grow", "plant", "feed", "help", "visit",
    # misc
    "maybe", "sure", "thanks", "please", "sorry", "welcome", "goodbye", "bye", "hi", "hey",
    "wow", "cool", "great", "okay", "never", "always", "often", "again", "soon", "now",
    "here", "there", "inside", "outside", "north", "south", "east", "west", "up", "down",
    "magic", "secret", "puzzle", "riddle", "treasure", "dragon", "wizard", "knight", "ghost",
    "planet", "galaxy", "comet", "atom", "pixel", "signal", "laser", "engine", "battery",
    "guitar", "piano", "violin", "drum", "flute", "jazz", "rock", "poem", "art", "science",
    "math", "history", "health", "sport", "soccer", "tennis", "golf", "chess", "yoga",
)
# fmt: on


def unique_words() -> list[str]:
    """Return the lexicon without duplicates, in first-seen order."""
    seen: dict[str, None] = {}
    for word in WORDS:
        seen.setdefault(word, None)
    return list(seen)


# Verbs used to build tool names such as ``get_weather`` or ``lookup_word``.
# fmt: off
TOOL_VERBS: tuple[str, ...] = (
    "get", "set", "find", "lookup", "search", "check", "send", "create", "delete", "update",
    "add", "remove", "convert", "translate", "fetch", "show", "play", "pause", "stop", "start",
    "book", "cancel", "open", "close", "read", "write", "save", "load", "share", "print",
    "call", "count", "compute", "measure", "predict", "schedule", "track", "rate", "rank",
    "sort", "filter", "move", "copy", "rename", "upload", "download", "buy", "sell", "pay",
    "order", "reserve", "list", "describe", "explain", "summarize", "define", "spell",
)

# Nouns used as tool-name objects and as parameter names.
PARAM_NOUNS: tuple[str, ...] = (
    "city", "word", "location", "query", "name", "text", "topic", "country", "color", "item",
    "unit", "language", "value", "amount", "date", "time", "day", "number", "title", "artist",
    "song", "movie", "book", "file", "folder", "email", "message", "user", "address", "price",
    "stock", "score", "size", "level", "mode", "status", "type", "total", "count", "currency",
    "genre", "album", "playlist", "channel", "volume", "speed", "distance", "weight", "height",
    "temperature", "recipe", "flight", "hotel", "ticket", "order", "account", "password",
    "task", "event", "meeting", "reminder", "alarm", "timer", "note", "report", "image",
    "photo", "video", "link", "code", "data", "list", "answer", "question", "result", "plan",
    "goal", "team", "project", "news", "story", "weather", "music", "game", "key", "card",
    "map", "room", "street", "station", "market", "shop", "restaurant", "animal", "color",
    "fruit", "food", "drink", "car", "trip", "month", "year", "hour", "friend", "author",
)
# fmt: on
