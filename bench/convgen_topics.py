"""The topic pool of bench/convgen.py: what speakers talk about, and how a person asks
about it later.

Each Topic is an event arc told over several sessions: a plan (optional), the event
itself (the evidence turn for "what" and "when" questions), a follow-up carrying one
detail (the evidence for the detail question), and asides (near misses: the same
speaker mentions a related but different thing). Utterance templates use specific
words; question templates describe the thing by a hypernym or a paraphrase, so that a
question shares no content word with its evidence (convgen checks it, see CONVGEN.md).

Placeholders in utterances: {v} the value, {d} the detail, {v2} another value of the
topic, {rel} a relative or friend, {o} the other speaker's name.
Placeholders in questions: {S} the speaker's name (or a pronoun in the second half of
a combined question), {Ss} its possessive, {time} a time expression with its leading
space (empty in a single-hop question), {A} and {B} the two speakers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Topic:
    key: str
    values: tuple[str, ...]
    details: tuple[str, ...]
    plan: tuple[str, ...]
    event: tuple[str, ...]
    follow: tuple[str, ...]
    aside: tuple[str, ...]
    q_what: tuple[str, ...]
    q_when: tuple[str, ...]
    q_detail: tuple[str, ...]
    q_both: tuple[str, ...]  # {A} and {B} each had one
    anchor: tuple[str, ...]  # a noun phrase naming the event, for "before/after" questions
    q_list: tuple[str, ...] = ()  # a speaker had several (repeatable topics only)
    repeatable: bool = False
    proper: bool = False  # values are proper nouns (cities, titles): questions may name them
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)


T = tuple  # the templates read better without tuple( ) around each list


TOPICS: list[Topic] = [
    Topic(
        key="instrument",
        values=T(
            [
                "cello",
                "violin",
                "piano",
                "ukulele",
                "saxophone",
                "trumpet",
                "drums",
                "flute",
                "banjo",
                "harp",
                "clarinet",
                "mandolin",
                "accordion",
                "trombone",
            ]
        ),
        details=T(
            [
                "Mrs. Okafor",
                "Mr. Lindqvist",
                "a retired jazz player called Remy",
                "Ms. Haddad",
                "a conservatory student named Ilse",
                "an old man from church, Mr. Bello",
            ]
        ),
        plan=T(
            [
                "I keep watching videos of people playing the {v}, I'm seriously tempted.",
                "I've wanted to pick up the {v} since I was a kid, maybe this is the year.",
                "Random thought: I think I'd be good at the {v}. Is that crazy?",
                "I've been looking at {v} prices online, they are not cheap.",
            ]
        ),
        event=T(
            [
                "I finally signed up for {v} lessons!",
                "Guess what, I had my very first {v} lesson on Saturday.",
                "I rented a {v} and started weekly lessons. My fingers hurt already.",
                "Big news: I'm officially a {v} student now, first lesson done.",
                "So I went for it, bought a secondhand {v} and booked lessons.",
            ]
        ),
        follow=T(
            [
                "My teacher is {d}, super patient with me even when I squeak.",
                "Practice is going okay. {d} says my posture is getting better.",
                "Lessons with {d} are the highlight of my week honestly.",
            ]
        ),
        aside=T(
            [
                "My {rel} plays the {v2}, maybe we could jam together someday.",
                "I used to play the {v2} in school but I quit after a year.",
                "There was a guy playing the {v2} at the station today, so good.",
            ]
        ),
        q_what=T(
            [
                "What instrument did {S} start learning{time}?",
                "Which instrument did {S} take up{time}?",
                "What musical instrument did {S} begin studying{time}?",
            ]
        ),
        q_when=T(
            [
                "When did {S} begin music classes?",
                "When did {S} take up an instrument?",
            ]
        ),
        q_detail=T(
            [
                "Who gives {S} music instruction?",
                "Who is {Ss} music tutor?",
            ]
        ),
        q_both=T(["Which instruments did {A} and {B} each take up?"]),
        anchor=T(["{Ss} first music class", "the day {S} took up an instrument"]),
    ),
    Topic(
        key="race",
        values=T(
            [
                "half marathon",
                "10K",
                "marathon",
                "sprint triathlon",
                "trail run",
                "charity 5K",
                "100-mile cycling sportive",
                "obstacle course race",
                "open-water swim",
            ]
        ),
        details=T(
            [
                "1 hour 52 minutes",
                "48 minutes",
                "just under four hours",
                "2:31",
                "an hour and ten",
                "a personal best by six minutes",
                "27 minutes",
            ]
        ),
        plan=T(
            [
                "I signed up for a {v} in a few weeks, training starts now.",
                "Thinking of entering a {v}. Someone talk me out of it.",
                "My training plan for the {v} has me out at 6am every day.",
                "I registered for the {v}, no going back now.",
            ]
        ),
        event=T(
            [
                "I did it, I finished the {v}!",
                "Did the {v} this weekend. Legs are destroyed but I'm so happy.",
                "Crossed the finish line of my {v} yesterday, I almost cried.",
                "Completed the {v}! The last stretch was brutal.",
            ]
        ),
        follow=T(
            [
                "My final time was {d}, better than I expected.",
                "Still can't believe the clock said {d} when I finished.",
                "Checked the results online: {d}. Not bad for a first try.",
            ]
        ),
        aside=T(
            [
                "My {rel} is doing a {v2} next month, way more hardcore than me.",
                "I watched a {v2} on TV last night, those people are machines.",
            ]
        ),
        q_what=T(
            [
                "What endurance event did {S} complete{time}?",
                "Which competition did {S} take part in{time}?",
                "What sporting challenge did {S} get through{time}?",
            ]
        ),
        q_when=T(
            [
                "When did {S} take part in an endurance competition?",
                "When was {Ss} big athletic event?",
            ]
        ),
        q_detail=T(
            [
                "How long did it take {S} to reach the end of {Pp} competition?",
                "What was {Ss} result in the endurance event?",
            ]
        ),
        q_both=T(["What athletic competitions did {A} and {B} each take part in?"]),
        q_list=T(["Which endurance events has {S} taken part in?"]),
        anchor=T(["{Ss} endurance event", "{Ss} big athletic competition"]),
        repeatable=True,
    ),
    Topic(
        key="pet",
        values=T(
            [
                "beagle puppy",
                "tabby kitten",
                "rescue greyhound",
                "pair of guinea pigs",
                "cockatiel",
                "golden retriever",
                "lop-eared rabbit",
                "tortoise",
                "border collie",
                "black cat",
                "corgi",
                "hamster",
            ]
        ),
        details=T(
            [
                "Biscuit",
                "Pepper",
                "Mochi",
                "Luna",
                "Rufus",
                "Ziggy",
                "Olive",
                "Nacho",
                "Pickles",
                "Juniper",
            ]
        ),
        plan=T(
            [
                "We've been visiting the shelter every weekend, I think we're ready for a {v}.",
                "I really want a {v}. My landlord finally said pets are okay.",
                "I keep looking at photos of a {v} on the adoption site.",
            ]
        ),
        event=T(
            [
                "We adopted a {v}! I'm obsessed already.",
                "Meet the newest member of the family: a {v}.",
                "I brought home a {v} from the shelter on Sunday.",
                "So, there's a {v} living in my flat now and I have no regrets.",
            ]
        ),
        follow=T(
            [
                "We named the little one {d}, it fits perfectly.",
                "{d} chewed through my charger cable, the little menace.",
                "{d} sleeps on my feet every night now.",
            ]
        ),
        aside=T(
            [
                "My {rel} has a {v2} that is the laziest animal alive.",
                "There was a lost {v2} in our street today, we found the owner.",
            ]
        ),
        q_what=T(
            [
                "What animal did {S} get{time}?",
                "What kind of pet joined {Ss} household{time}?",
                "Which animal companion did {S} take in{time}?",
            ]
        ),
        q_when=T(["When did {S} get a pet?", "When did {Ss} household grow by one animal?"]),
        q_detail=T(["What is the name of {Ss} pet?", "What did {S} call {Pp} new animal?"]),
        q_both=T(["What animals did {A} and {B} each get?"]),
        anchor=T(["the arrival of {Ss} pet", "the day {S} got a pet"]),
    ),
    Topic(
        key="trip",
        values=T(
            [
                "Lisbon",
                "Kyoto",
                "Reykjavik",
                "Barcelona",
                "Prague",
                "Vancouver",
                "Marrakech",
                "Edinburgh",
                "Istanbul",
                "Seoul",
                "Oaxaca",
                "Krakow",
                "Dublin",
                "Hanoi",
                "Vienna",
                "Montreal",
                "Naples",
                "Tbilisi",
                "Cartagena",
                "Copenhagen",
                "Valparaiso",
                "Porto",
                "Seville",
                "Bergen",
            ]
        ),
        details=T(
            [
                "grilled sardines",
                "street tacos every single night",
                "the best dumplings of my life",
                "a cooking class with a local family",
                "a sunrise hike up the hill",
                "a tiny jazz bar we went back to three times",
                "a boat tour around the harbour",
                "an old bookshop with a cat in it",
                "a food market that went on for blocks",
            ]
        ),
        plan=T(
            [
                "I just booked flights to {v}!",
                "Planning a trip to {v}, any tips?",
                "Counting down the days until {v}, I need a holiday badly.",
                "Been reading guidebooks about {v} all week.",
            ]
        ),
        event=T(
            [
                "Just got back from {v}, what a trip.",
                "Writing to you from {v}! The weather is perfect.",
                "{v} was everything I hoped for and more.",
                "Spent the whole week in {v}, I didn't want to leave.",
            ]
        ),
        follow=T(
            [
                "Still thinking about {d} from the trip.",
                "The highlight of the holiday was {d}.",
                "I showed my mum the photos of {d}, she wants to go now too.",
            ]
        ),
        aside=T(
            [
                "My {rel} just got back from {v2} and won't stop talking about it.",
                "I almost went to {v2} instead, maybe next year.",
                "There's a documentary about {v2} I want to watch.",
            ]
        ),
        q_what=T(
            [
                "Which city did {S} travel to{time}?",
                "Where did {S} go on holiday{time}?",
                "What place did {S} visit{time}?",
            ]
        ),
        q_when=T(["When did {S} travel to {v}?", "When was {Ss} holiday in {v}?"]),
        q_detail=T(
            [
                "What was the best part of {Ss} time in {v}?",
                "What does {S} remember most from {v}?",
            ]
        ),
        q_both=T(["Which cities did {A} and {B} each travel to?"]),
        q_list=T(["Which cities has {S} been to on holiday?", "Where has {S} travelled?"]),
        anchor=T(["{Ss} holiday in {v}", "{Ss} journey to {v}"]),
        repeatable=True,
        proper=True,
    ),
    Topic(
        key="job",
        values=T(
            [
                "UX designer at a fintech startup",
                "nurse at the children's hospital",
                "sous-chef at an Italian place",
                "chemistry teacher at a high school",
                "product manager at a travel company",
                "paralegal at a small law firm",
                "data analyst for the city council",
                "carpenter's apprentice",
                "physiotherapist at a sports clinic",
                "editor at a publishing house",
            ]
        ),
        details=T(
            [
                "a four-day week",
                "a boss who actually listens",
                "a team of only five people",
                "a forty-minute bike commute",
                "free lunch on Fridays",
                "a big raise",
            ]
        ),
        plan=T(
            [
                "I've got an interview next week for a job as a {v}.",
                "Applied for a {v} role today, fingers crossed.",
                "I'm so done with my current job. I'd love to be a {v}.",
            ]
        ),
        event=T(
            [
                "I got the job! I'm going to be a {v}.",
                "First day as a {v} today, I'm exhausted but happy.",
                "Signed the contract, I'm officially a {v} now.",
            ]
        ),
        follow=T(
            [
                "The new job comes with {d}, which is amazing.",
                "Best thing about the new position so far is {d}.",
                "I'm a month in and honestly {d} makes all the difference.",
            ]
        ),
        aside=T(
            [
                "My {rel} is a {v2}, apparently it's more stressful than it looks.",
                "I almost became a {v2} after school, funny how things go.",
            ]
        ),
        q_what=T(
            [
                "What position did {S} land{time}?",
                "What new line of work did {S} begin{time}?",
                "What role was {S} hired for{time}?",
            ]
        ),
        q_when=T(["When did {S} switch careers?", "When was {S} hired for a new role?"]),
        q_detail=T(
            [
                "What perk does {Ss} new employer offer?",
                "What does {S} like about {Pp} new workplace?",
            ]
        ),
        q_both=T(["What new positions did {A} and {B} each land?"]),
        anchor=T(["{Ss} career change", "{Ss} new employment"]),
    ),
    Topic(
        key="health",
        values=T(
            [
                "sprained ankle",
                "broken wrist",
                "torn meniscus",
                "slipped disc",
                "bad case of the flu",
                "pulled hamstring",
                "concussion",
                "dislocated shoulder",
                "nasty bout of bronchitis",
            ]
        ),
        details=T(
            [
                "physio twice a week",
                "six weeks in a brace",
                "strict rest and ice",
                "a course of antibiotics",
                "acupuncture, which surprisingly helped",
                "swimming every morning",
            ]
        ),
        plan=T(
            [
                "Something feels off, I might be coming down with something.",
                "I've been overdoing it at the gym, my body is complaining.",
            ]
        ),
        event=T(
            [
                "Ugh, the doctor says I have a {v}.",
                "Ended up in A&E last night: {v}.",
                "Turns out it's a {v}, so I'm stuck on the sofa.",
                "Got diagnosed with a {v} today. Not the week I planned.",
            ]
        ),
        follow=T(
            [
                "Recovery plan is {d}, I'm being a good patient.",
                "The doctor prescribed {d} and it's slowly working.",
                "Feeling much better thanks to {d}.",
            ]
        ),
        aside=T(
            [
                "My {rel} had a {v2} last year and was off work for ages.",
                "At least it's not a {v2} like my coworker had.",
            ]
        ),
        q_what=T(
            [
                "What injury or illness did {S} suffer{time}?",
                "What medical problem did {S} have{time}?",
                "What laid {S} up{time}?",
            ]
        ),
        q_when=T(["When did {S} get hurt or fall ill?", "When was {S} unwell?"]),
        q_detail=T(
            [
                "How was {S} treated while recovering?",
                "What helped {S} recover?",
            ]
        ),
        q_both=T(["What injuries or illnesses did {A} and {B} each go through?"]),
        anchor=T(["{Ss} medical trouble", "the time {S} got hurt"]),
    ),
    Topic(
        key="cooking",
        values=T(
            [
                "sourdough bread",
                "homemade ramen",
                "a Thai green curry",
                "fresh pasta",
                "pork dumplings",
                "seafood paella",
                "a lemon tart",
                "kimchi",
                "beef wellington",
                "croissants",
                "vegan lasagna",
            ]
        ),
        details=T(
            [
                "my grandmother's recipe",
                "a YouTube chef from Osaka",
                "a cookbook I found at a flea market",
                "a recipe my neighbour wrote down for me",
                "an old magazine",
            ]
        ),
        plan=T(
            [
                "This weekend I'm attempting {v}, wish me luck.",
                "I've been craving {v} and I think I'll try making it.",
            ]
        ),
        event=T(
            [
                "I made {v} from scratch and it actually worked!",
                "Spent all Sunday in the kitchen making {v}. Worth it.",
                "Tried my hand at {v} last night, the family loved it.",
            ]
        ),
        follow=T(
            [
                "The secret was {d}, I'll send you a copy.",
                "I followed {d}, which made it foolproof.",
            ]
        ),
        aside=T(
            [
                "My {rel} makes incredible {v2}, I'll never match it.",
                "We ordered {v2} from the place downstairs, lazy night.",
            ]
        ),
        q_what=T(
            [
                "What dish did {S} prepare at home{time}?",
                "What did {S} cook{time}?",
                "Which meal did {S} whip up{time}?",
            ]
        ),
        q_when=T(["When did {S} try an ambitious dish in the kitchen?"]),
        q_detail=T(["Where did {S} get the instructions for {Pp} dish?"]),
        q_both=T(["What dishes did {A} and {B} each cook?"]),
        q_list=T(["What dishes has {S} cooked?"]),
        anchor=T(["{Ss} cooking project", "{Ss} kitchen experiment"]),
        repeatable=True,
    ),
    Topic(
        key="book",
        values=T(
            [
                "Project Hail Mary",
                "The Night Circus",
                "Pachinko",
                "Circe",
                "The Overstory",
                "Station Eleven",
                "Educated",
                "Piranesi",
                "The Remains of the Day",
                "Klara and the Sun",
                "A Gentleman in Moscow",
                "The Name of the Wind",
                "Lessons in Chemistry",
            ]
        ),
        details=T(
            [
                "it made me cry on the train",
                "the ending was a total letdown",
                "I stayed up until 3am to finish it",
                "I already lent it to my brother",
                "I want to read everything by the author now",
            ]
        ),
        plan=T(
            [
                "Just picked up {v} from the library.",
                "Everyone keeps recommending {v}, I'll start it tonight.",
            ]
        ),
        event=T(
            [
                "Finished {v} last night.",
                "I just turned the last page of {v}.",
                "Done with {v}! What a read.",
            ]
        ),
        follow=T(
            [
                "About that novel: {d}.",
                "Honestly that book stayed with me, {d}.",
            ]
        ),
        aside=T(
            [
                "My {rel} is reading {v2}, says it's slow going.",
                "I tried {v2} once and gave up after fifty pages.",
            ]
        ),
        q_what=T(
            [
                "What novel did {S} get through{time}?",
                "Which title did {S} complete reading{time}?",
            ]
        ),
        q_when=T(["When did {S} read {v}?"]),
        q_detail=T(["What did {S} think of {v}?", "How did {S} react to {v}?"]),
        q_both=T(["What novels did {A} and {B} each get through?"]),
        q_list=T(["Which novels has {S} mentioned reading?"]),
        anchor=T(["{S} reading {v}"]),
        repeatable=True,
        proper=True,
    ),
    Topic(
        key="film",
        values=T(
            [
                "Dune: Part Two",
                "Past Lives",
                "Spirited Away",
                "Oppenheimer",
                "The Grand Budapest Hotel",
                "Everything Everywhere All at Once",
                "Parasite",
                "Arrival",
                "Paddington 2",
                "Amelie",
                "Mad Max: Fury Road",
            ]
        ),
        details=T(
            [
                "we watched it on a huge outdoor screen",
                "the soundtrack is still stuck in my head",
                "I fell asleep halfway and had to rewatch",
                "my partner hated it",
                "we saw it at a tiny cinema with only six people",
            ]
        ),
        plan=T(["We're planning a movie night with {v}.", "Has anyone seen {v}? Thinking of it."]),
        event=T(
            [
                "Watched {v} last night.",
                "Finally saw {v}, I get the hype now.",
                "We had a cosy evening in with {v}.",
            ]
        ),
        follow=T(["Funny thing about that movie night: {d}.", "Oh and I forgot to say, {d}."]),
        aside=T(["My {rel} wants me to watch {v2} next.", "I can't believe you never saw {v2}!"]),
        q_what=T(
            [
                "What film did {S} see{time}?",
                "Which picture did {S} catch{time}?",
            ]
        ),
        q_when=T(["When did {S} see {v}?"]),
        q_detail=T(["What happened when {S} saw {v}?"]),
        q_both=T(["What films did {A} and {B} each see?"]),
        q_list=T(["Which films has {S} seen?"]),
        anchor=T(["{Ss} screening of {v}"]),
        repeatable=True,
        proper=True,
    ),
    Topic(
        key="purchase",
        values=T(
            [
                "used Honda Civic",
                "e-bike",
                "standing desk",
                "new laptop",
                "espresso machine",
                "kayak",
                "telescope",
                "sewing machine",
                "drone",
                "record player",
                "robot vacuum",
                "road bike",
                "camping tent",
            ]
        ),
        details=T(
            [
                "three hundred dollars",
                "way over budget",
                "half price in a sale",
                "a bargain from a neighbour",
                "nearly a month's rent",
                "twelve monthly payments",
            ]
        ),
        plan=T(
            [
                "I'm saving up for a {v}.",
                "Been comparing reviews of every {v} on the internet.",
                "Should I get a {v}? I keep going back and forth.",
            ]
        ),
        event=T(
            [
                "I bought a {v}!",
                "Treated myself to a {v} this week.",
                "The {v} arrived today and I'm in love.",
                "Finally ordered the {v}, no regrets.",
            ]
        ),
        follow=T(
            ["It cost me {d}, but it's worth it.", "Paid {d} in the end, can you believe it?"]
        ),
        aside=T(
            [
                "My {rel} got a {v2} and never uses it.",
                "I almost bought a {v2} instead, glad I didn't.",
            ]
        ),
        q_what=T(
            [
                "What did {S} buy{time}?",
                "What did {S} splurge on{time}?",
                "What item did {S} purchase{time}?",
            ]
        ),
        q_when=T(["When did {S} make a big purchase?"]),
        q_detail=T(["How much did {Ss} purchase cost?", "What price did {S} pay?"]),
        q_both=T(["What big-ticket items did {A} and {B} each buy?"]),
        q_list=T(["What big-ticket items has {S} purchased?"]),
        anchor=T(["{Ss} big purchase", "{Ss} shopping splurge"]),
        repeatable=True,
    ),
    Topic(
        key="move",
        values=T(
            [
                "a flat near the river",
                "a tiny house outside the city",
                "a two-bedroom in the old town",
                "my parents' basement",
                "a loft above a bakery",
                "a shared house with three friends",
                "a cottage by the coast",
            ]
        ),
        details=T(
            [
                "the light in the mornings",
                "the neighbours bringing cake",
                "finally having a garden",
                "the walk to work",
                "the noise, which is awful",
            ]
        ),
        plan=T(
            [
                "We're house hunting, I've seen six places this week.",
                "The lease is up soon, I need to find somewhere new.",
                "Packing boxes every evening, my life is cardboard now.",
            ]
        ),
        event=T(
            [
                "We moved into {v} this weekend!",
                "I'm writing from {v}, the new place.",
                "Signed the lease on {v}, moving day was chaos.",
            ]
        ),
        follow=T(
            [
                "Best part of the new place is {d}.",
                "Settling in slowly. The thing I notice most is {d}.",
            ]
        ),
        aside=T(["My {rel} just moved to {v2}, so we're both unpacking."]),
        q_what=T(
            [
                "Where did {S} relocate to{time}?",
                "What kind of home did {S} settle into{time}?",
            ]
        ),
        q_when=T(["When did {S} relocate?", "When did {S} change address?"]),
        q_detail=T(["What stands out to {S} about {Pp} new home?"]),
        q_both=T(["Where did {A} and {B} each relocate to?"]),
        anchor=T(["{Ss} relocation", "{Ss} change of address"]),
    ),
    Topic(
        key="workshop",
        values=T(
            [
                "pottery workshop",
                "woodworking workshop",
                "photography workshop",
                "watercolour workshop",
                "public speaking workshop",
                "bookbinding workshop",
                "stand-up comedy workshop",
                "candle-making workshop",
                "first-aid workshop",
            ]
        ),
        details=T(
            [
                "a wonky but lovely bowl",
                "a little stool that doesn't wobble",
                "a portrait of my dad",
                "a handmade notebook",
                "a five-minute set that got real laughs",
                "a certificate I put on the fridge",
            ]
        ),
        plan=T(["I signed up for a {v} next month.", "There's a {v} at the community centre."]),
        event=T(
            [
                "Went to the {v} today, so much fun.",
                "The {v} was great, I want to do more.",
                "Spent my Saturday at a {v}, totally worth it.",
            ]
        ),
        follow=T(["From that class I came home with {d}.", "My proudest result: {d}."]),
        aside=T(
            ["My {rel} did a {v2} and loved it.", "They also run a {v2}, maybe I'll go to that."]
        ),
        q_what=T(
            [
                "What class did {S} attend{time}?",
                "What course did {S} go to{time}?",
            ]
        ),
        q_when=T(["When did {S} attend a hands-on class?"]),
        q_detail=T(["What did {S} make or achieve in {Pp} class?"]),
        q_both=T(["What classes did {A} and {B} each attend?"]),
        q_list=T(["Which classes has {S} attended?"]),
        anchor=T(["{Ss} hands-on class", "{Ss} one-day course"]),
        repeatable=True,
    ),
    Topic(
        key="concert",
        values=T(
            [
                "Arctic Monkeys",
                "Florence and the Machine",
                "Kendrick Lamar",
                "the city symphony",
                "Fleetwood Mac tribute band",
                "Rosalia",
                "Radiohead",
                "Billie Eilish",
                "Hozier",
                "Tame Impala",
                "Norah Jones",
            ]
        ),
        details=T(
            [
                "they played my favourite song as the encore",
                "it rained the whole time",
                "we got front-row spots",
                "I lost my voice from singing",
                "the support act was even better",
            ]
        ),
        plan=T(["Got tickets to see {v}!", "{v} is playing here soon, should I go?"]),
        event=T(
            [
                "Saw {v} live last night, incredible.",
                "{v} was unreal in concert.",
                "Just came home from the {v} gig, ears ringing.",
            ]
        ),
        follow=T(["Best bit of the show: {d}.", "Still buzzing from that night, {d}."]),
        aside=T(["My {rel} saw {v2} last week, jealous.", "I missed {v2} when they came through."]),
        q_what=T(
            [
                "Who did {S} see perform{time}?",
                "Which artist did {S} watch on stage{time}?",
            ]
        ),
        q_when=T(["When did {S} see {v} perform?"]),
        q_detail=T(["What was memorable about {Ss} night watching {v}?"]),
        q_both=T(["Which performers did {A} and {B} each watch on stage?"]),
        q_list=T(["Which performers has {S} watched on stage?"]),
        anchor=T(["{Ss} night watching {v}", "the {v} show {S} went to"]),
        repeatable=True,
        proper=True,
    ),
    Topic(
        key="volunteer",
        values=T(
            [
                "the animal shelter",
                "the food bank",
                "the community garden",
                "a literacy programme",
                "a beach cleanup",
                "the hospice",
                "a refugee welcome centre",
                "a youth football club",
            ]
        ),
        details=T(
            [
                "sorting donations",
                "walking dogs",
                "teaching kids to read",
                "planting tomatoes",
                "serving soup",
                "coaching the under-tens",
            ]
        ),
        plan=T(["I want to give something back, thinking about {v}."]),
        event=T(
            [
                "Did my first volunteer shift at {v}.",
                "Started volunteering at {v} on Saturdays.",
                "Spent the morning helping out at {v}.",
            ]
        ),
        follow=T(
            [
                "Mostly I've been {d}, it's very rewarding.",
                "They have me {d}, which I love.",
            ]
        ),
        aside=T(["My {rel} helps at {v2}, maybe we'll team up."]),
        q_what=T(
            [
                "Where did {S} start donating {Pp} time{time}?",
                "What charitable work did {S} take on{time}?",
            ]
        ),
        q_when=T(["When did {S} begin unpaid charity work?"]),
        q_detail=T(["What tasks does {S} do as a helper?"]),
        q_both=T(["Where do {A} and {B} each give their time for free?"]),
        anchor=T(["{Ss} first charity shift"]),
    ),
    Topic(
        key="family",
        values=T(
            [
                "sister had a baby girl",
                "brother got engaged",
                "dad retired",
                "grandma turned ninety",
                "cousin graduated from medical school",
                "mum started a bakery",
                "aunt remarried",
                "nephew started school",
            ]
        ),
        details=T(
            [
                "a huge party in the garden",
                "a speech that made everyone cry",
                "a cake shaped like a stethoscope",
                "forty relatives in one tiny house",
                "dancing until midnight",
            ]
        ),
        plan=T(["Big family news coming soon, I'll tell you when I can."]),
        event=T(
            [
                "Family news: my {v}!",
                "So happy, my {v} this week.",
                "You won't believe it, my {v}.",
            ]
        ),
        follow=T(["We celebrated with {d}.", "The celebration had {d}, classic us."]),
        aside=T(["My friend's {v2}, it's the season for it."]),
        q_what=T(
            [
                "What happened in {Ss} family{time}?",
                "What milestone did one of {Ss} relatives reach{time}?",
            ]
        ),
        q_when=T(["When did {Ss} relatives have reason to celebrate?"]),
        q_detail=T(["How did {Ss} family mark the occasion?"]),
        q_both=T(["What family milestones did {A} and {B} each share?"]),
        anchor=T(["{Ss} family milestone"]),
    ),
    Topic(
        key="hobby",
        values=T(
            [
                "bouldering",
                "knitting",
                "birdwatching",
                "chess",
                "gardening",
                "rock painting",
                "salsa dancing",
                "archery",
                "fly fishing",
                "calligraphy",
                "skateboarding",
                "origami",
            ]
        ),
        details=T(
            [
                "a club that meets on Thursdays",
                "an app that tracks my progress",
                "a mentor twice my age",
                "a group chat of beginners",
                "a little notebook of attempts",
            ]
        ),
        plan=T(["I need a hobby that isn't my phone. Maybe {v}?"]),
        event=T(
            [
                "I've gotten really into {v} lately.",
                "Tried {v} for the first time and I'm hooked.",
                "My new obsession is {v}, I do it every spare minute.",
            ]
        ),
        follow=T(["What keeps me at it is {d}.", "Honestly {d} has made all the difference."]),
        aside=T(["My {rel} is big into {v2}, not my thing though."]),
        q_what=T(
            [
                "What pastime did {S} pick up{time}?",
                "What leisure activity did {S} become passionate about{time}?",
            ]
        ),
        q_when=T(["When did {S} discover a new pastime?"]),
        q_detail=T(["What helps {S} stick with {Pp} pastime?"]),
        q_both=T(["What pastimes did {A} and {B} each pick up?"]),
        anchor=T(["{S} discovering a new pastime"]),
    ),
    Topic(
        key="language",
        values=T(
            [
                "Spanish",
                "Japanese",
                "Italian",
                "German",
                "Korean",
                "Portuguese",
                "Arabic",
                "Mandarin",
                "Greek",
            ]
        ),
        details=T(
            [
                "a tutor on video calls",
                "a green owl app",
                "evening classes at the college",
                "a conversation group in a cafe",
                "flashcards on the bus",
            ]
        ),
        plan=T(["I really want to learn {v} before I'm forty."]),
        event=T(
            [
                "I started {v} lessons this week!",
                "Día uno... okay, I mean day one of learning {v}.",
                "Enrolled in a {v} course, homework already.",
            ]
        ),
        follow=T(["I'm practising with {d}, slowly improving.", "Using {d} and it works."]),
        aside=T(["My {rel} speaks {v2} fluently, so jealous."]),
        q_what=T(
            [
                "What tongue did {S} start studying{time}?",
                "Which foreign language did {S} begin{time}?",
            ]
        ),
        q_when=T(["When did {S} begin studying a foreign tongue?"]),
        q_detail=T(["How is {S} practising {Pp} foreign tongue?"]),
        q_both=T(["What foreign tongues did {A} and {B} each begin?"]),
        anchor=T(["{Ss} first foreign-tongue class"]),
        proper=True,
    ),
    Topic(
        key="project",
        values=T(
            [
                "the new booking app",
                "the company website redesign",
                "the warehouse inventory migration",
                "the annual sales conference",
                "the customer survey",
                "the office relocation",
                "the mobile checkout",
            ]
        ),
        details=T(
            [
                "two weeks ahead of schedule",
                "with a bug that kept us up all night",
                "to a standing ovation from the board",
                "a month late but nobody minded",
                "with cake for the whole team",
            ]
        ),
        plan=T(["Work is crazy, I'm leading {v} now.", "My manager put me in charge of {v}."]),
        event=T(
            [
                "We shipped {v}! Celebrating tonight.",
                "{v} is finally done and live.",
                "Wrapped up {v} today, what a relief.",
            ]
        ),
        follow=T(["It went out {d}.", "We closed it off {d}."]),
        aside=T(["The other team is still stuck on {v2}, poor things."]),
        q_what=T(
            [
                "What work assignment did {S} complete{time}?",
                "Which professional undertaking did {S} deliver{time}?",
            ]
        ),
        q_when=T(["When did {S} deliver {Pp} big assignment at the office?"]),
        q_detail=T(["How did {Ss} big office assignment end?"]),
        q_both=T(["What office assignments did {A} and {B} each deliver?"]),
        anchor=T(["the delivery of {Ss} office assignment"]),
    ),
    Topic(
        key="teamsport",
        values=T(
            [
                "volleyball league",
                "five-a-side football team",
                "tennis club",
                "basketball pickup group",
                "ultimate frisbee team",
                "rowing crew",
                "table tennis club",
                "netball team",
            ]
        ),
        details=T(
            [
                "we won our first match",
                "I scored the winning point",
                "we lost every game so far",
                "I got voted captain",
                "I twisted my finger but kept playing",
            ]
        ),
        plan=T(["Thinking of joining a {v} to get fit."]),
        event=T(
            [
                "I joined a {v}!",
                "First practice with my new {v} tonight.",
                "Signed up to a {v}, Tuesday nights.",
            ]
        ),
        follow=T(["Update from the court: {d}.", "Quick sports update: {d}."]),
        aside=T(["My {rel} is in a {v2}, they're really competitive."]),
        q_what=T(
            [
                "What sports group did {S} become a member of{time}?",
                "Which squad did {S} sign up with{time}?",
            ]
        ),
        q_when=T(["When did {S} become a member of a sports squad?"]),
        q_detail=T(["How is {Ss} squad doing?"]),
        q_both=T(["Which squads did {A} and {B} each become members of?"]),
        anchor=T(["{S} becoming a member of a squad"]),
    ),
]

# Turns that state no fact: reactions, questions back, small talk. Distractors.
REACTIONS = T(
    [
        "That sounds wonderful!",
        "Oh wow, good for you!",
        "No way! Tell me more.",
        "I'm so happy for you.",
        "Haha, that's so you.",
        "That's amazing, honestly.",
        "Wait, really? Since when?",
        "You never cease to surprise me.",
        "I love that for you.",
        "That's brilliant news!",
        "Hope it goes well!",
        "Proud of you!",
        "Ha, I would never have guessed.",
        "Send pictures!",
        "How did that go?",
        "What made you decide that?",
        "You deserve it.",
        "Fingers crossed for you.",
        "Ooh, exciting!",
        "Seriously impressive.",
        "I'd love to hear how it turns out.",
        "Good luck with it!",
        "Oh that's lovely.",
        "Nice, how are you feeling about it?",
        "Wow, big step!",
        "That's hilarious.",
        "Whoa, tell me everything.",
        "Okay, that's very cool.",
        "You're always up to something!",
        "I did not see that coming.",
        "Love it.",
        "Sounds like a good time.",
        "Now I'm jealous.",
        "Good on you.",
        "Well, look at you!",
        "That's so exciting.",
    ]
)

# Reactions to bad news (the health topic).
SYMPATHY = T(
    [
        "Oh no, I'm sorry to hear that.",
        "Sounds like a lot, take it easy.",
        "Ugh, that's rough.",
        "That must have been awful.",
        "Poor you! Rest up.",
        "Sending you a big hug.",
        "That's the worst, I'm sorry.",
        "Let me know if you need anything.",
    ]
)

SMALLTALK = T(
    [
        ("How was your week?", "Pretty quiet, mostly work and sleep."),
        ("How are you doing?", "Not bad, a bit tired but okay."),
        ("Anything new?", "Nothing much, same old."),
        ("Did you have a good weekend?", "It was nice and lazy, exactly what I needed."),
        ("The weather has been strange lately.", "Right? Sun one minute, rain the next."),
        ("Sorry for the late reply!", "No worries at all."),
        ("I've missed our chats.", "Me too, life gets busy."),
        ("What are you up to tonight?", "Probably just a quiet evening in."),
        ("Long day?", "The longest. Glad it's over."),
        ("Are you keeping well?", "Yes thanks, can't complain."),
        ("I need more sleep.", "Don't we all."),
        ("Any plans for the weekend?", "Not yet, I'll see how I feel."),
        ("Time flies, doesn't it?", "It really does, scary."),
        ("I made way too much coffee today.", "Is there such a thing?"),
        ("Mondays, am I right?", "Don't get me started."),
        ("How's everyone at home?", "All good, thanks for asking."),
        ("Talk about a busy month.", "Tell me about it."),
        ("Did you sleep okay?", "Like a log for once."),
    ]
)

GREETINGS = T(
    [
        "Hey {o}! How's it going?",
        "Hi {o}, long time no talk!",
        "Hey you, got a minute?",
        "Hello {o}! Hope you're well.",
        "Hi {o}! Guess what.",
    ]
)
GREETING_REPLIES = T(
    [
        "Hey! Good to hear from you.",
        "Hi! I was just thinking about you.",
        "Hello! Always have a minute for you.",
        "Hey hey! What's up?",
        "Hi! Doing well, you?",
    ]
)
CLOSINGS = T(
    [
        ("Anyway, I should run. Talk soon!", "Bye! Take care."),
        ("Okay, dinner's ready, catch you later.", "Enjoy! Speak soon."),
        ("Gotta go, but this was nice.", "Same here, bye for now!"),
        ("Let's catch up again soon.", "Definitely. Have a good one!"),
        ("Right, bedtime for me.", "Sleep well!"),
    ]
)

RELATIVES = T(
    [
        "sister",
        "brother",
        "cousin",
        "neighbour",
        "coworker",
        "flatmate",
        "aunt",
        "uncle",
        "best friend",
        "brother-in-law",
    ]
)

# Speakers: first names from many places, each with the pronouns a question uses.
NAMES = T(
    [
        (n, p)
        for group, p in (
            (
                "Maria Aisha Priya Olga Sofia Mei Hannah Fatima Ngozi Elena Chloe Amara Lucia "
                "Ingrid Nadia Zara Leila Anya Rosa Greta Yuki Imani Freya Sana Wanjiru Dana "
                "Ayesha Beatriz Lina Mira Keiko Esi Marisol",
                "she",
            ),
            (
                "Tom Kenji Mateo Kwame Liam Omar Diego Lars Raj Yusuf Ivan Hiroshi Samir "
                "Tunde Pablo Felix Bruno Kofi Arjun Malik Tomasz Carlos Jamal Emil Marco "
                "Oscar Noah Sven Andre Hugo Dmitri Rafael Tariq",
                "he",
            ),
        )
        for n in group.split()
    ]
)

# Questions that name the thing they ask about, as a person often does ("When did Tom
# run his half marathon?"): the thing is given, the answer (a date, a detail, what
# happened around it) is not in the question. Half of the `when` and `detail` questions
# and of the anchors are drawn from these (bench/convgen.py), the rest paraphrase.
NAMED: dict[str, dict[str, tuple[str, ...]]] = {
    "instrument": {
        "when": ("When did {S} start on the {v}?", "When did {S} first try the {v} with a tutor?"),
        "detail": ("Who coaches {S} on the {v}?", "Who is showing {S} how to play the {v}?"),
        "anchor": ("{Ss} first {v} class", "{S} taking up the {v}"),
    },
    "race": {
        "follow": (
            "My time in the {v} was {d}, better than I expected.",
            "The results of the {v} are up: {d}.",
        ),
        "when": ("When did {S} do the {v}?", "When was {Ss} {v}?"),
        "detail": ("How fast was {S} in the {v}?", "What was {Ss} result in the {v}?"),
        "anchor": ("{Ss} {v}",),
    },
    "pet": {
        "when": ("When did {S} get the {v}?", "When did the {v} come to live with {S}?"),
        "detail": ("What is {Ss} {v} called?",),
        "anchor": ("the arrival of {Ss} {v}",),
    },
    "job": {
        "when": ("When did {S} start as a {v}?",),
        "detail": ("What does {S} like about working as a {v}?",),
        "anchor": ("{S} starting as a {v}",),
    },
    "health": {
        "when": ("When did {S} have the {v}?", "When was {S} dealing with a {v}?"),
        "detail": ("How did {S} get over the {v}?",),
        "anchor": ("{Ss} {v}",),
    },
    "cooking": {
        "follow": ("The secret to the {v} was {d}.", "For the {v} I followed {d}, foolproof."),
        "when": ("When did {S} prepare {v}?", "When did {S} cook {v}?"),
        "detail": ("Whose recipe did {S} use for the {v}?",),
        "anchor": ("{Ss} attempt at {v}",),
    },
    "purchase": {
        "follow": (
            "The {v} cost me {d}, but it's worth it.",
            "Paid {d} for the {v} in the end, can you believe it?",
        ),
        "when": ("When did {S} get the {v}?",),
        "detail": ("How much did {Ss} {v} cost?", "What did {S} pay for the {v}?"),
        "anchor": ("{S} getting the {v}",),
    },
    "move": {
        "when": ("When did {S} settle into {v}?",),
        "detail": ("What stands out to {S} about living in {v}?",),
        "anchor": ("{Ss} relocation to {v}",),
    },
    "workshop": {
        "follow": ("From the {v} I came home with {d}.", "My proudest result from the {v}: {d}."),
        "when": ("When did {S} attend the {v}?",),
        "detail": ("What did {S} come away with from the {v}?",),
        "anchor": ("the {v} {S} attended",),
    },
    "volunteer": {
        "when": ("When did {S} start helping at {v}?",),
        "detail": ("What does {S} do at {v}?",),
        "anchor": ("{Ss} first shift at {v}",),
    },
    "hobby": {
        "when": ("When did {S} get into {v}?",),
        "detail": ("What keeps {S} going with {v}?",),
        "anchor": ("{S} taking up {v}",),
    },
    "language": {
        "when": ("When did {S} begin studying {v}?",),
        "detail": ("How is {S} practising {v}?",),
        "anchor": ("{Ss} first {v} class",),
    },
    "project": {
        "when": ("When did {S} finish {v}?",),
        "detail": ("How did {v} turn out for {S}?",),
        "anchor": ("the launch of {v}",),
    },
    "teamsport": {
        "when": ("When did {S} join the {v}?",),
        "detail": ("How is {S} getting on with the {v}?",),
        "anchor": ("{S} joining the {v}",),
    },
}

# What the other speaker says back about a topic: small talk in the topic's own words
# (often a question's words), stating no fact about the teller. Near misses.
REPLIES: dict[str, tuple[str, ...]] = {
    "instrument": (
        "I always wanted to learn an instrument too.",
        "Music lessons as an adult, that's brave!",
        "Which instrument was it again you were thinking of?",
    ),
    "race": (
        "I could never run that far, respect.",
        "How long did you train for it?",
        "Endurance stuff terrifies me.",
    ),
    "pet": (
        "Animals make a home, don't they?",
        "I'd love a pet but my building doesn't allow them.",
        "Send me a photo of the little creature!",
    ),
    "trip": (
        "I need a holiday so badly.",
        "Travelling is the best way to spend money.",
        "Which part of the trip did you like most?",
    ),
    "job": (
        "A new job is such a big change.",
        "Work has been so dull for me lately.",
        "Do you think you'll like the people there?",
    ),
    "health": (
        "Get well soon, seriously.",
        "Have you seen a doctor about it?",
        "Take care of yourself, health comes first.",
    ),
    "cooking": (
        "I can barely boil an egg.",
        "You should open a restaurant!",
        "Save me some next time.",
    ),
    "book": (
        "I haven't read a novel in ages.",
        "Is it worth reading?",
        "You always have the best book recommendations.",
    ),
    "film": (
        "I fall asleep during every film, it's a problem.",
        "Was it as good as people say?",
    ),
    "purchase": (
        "Ooh, treating yourself!",
        "I really need to stop buying things online.",
        "Was it expensive?",
    ),
    "move": (
        "Moving is the worst, good luck.",
        "I hate packing more than anything.",
        "Is the new neighbourhood nice?",
    ),
    "workshop": (
        "I love a good hands-on class.",
        "Those courses are always more fun than you expect.",
    ),
    "concert": (
        "I haven't been to a gig in years.",
        "Live music is the best.",
    ),
    "volunteer": (
        "That's such a kind way to spend your time.",
        "I keep meaning to volunteer somewhere.",
    ),
    "family": (
        "Congratulations to the whole family!",
        "Family news is the best news.",
    ),
    "hobby": (
        "I need a hobby that isn't scrolling.",
        "Where do you even find the time for it?",
    ),
    "language": (
        "I only remember three words from school French.",
        "Languages are so hard as an adult.",
    ),
    "project": (
        "Sounds like a stressful few weeks at work.",
        "Your office sounds intense.",
    ),
    "teamsport": (
        "Team sports were never my thing.",
        "That's a great way to meet people.",
    ),
}

# Follow-ups of the proper-noun topics that name the thing: a speaker with two trips or
# two books says which one the detail is about, as a person would.
for _key, _follow in {
    "trip": ("Still thinking about {d} from {v}.", "The highlight of {v} was {d}."),
    "book": ("About {v}: {d}.", "{v} stayed with me, {d}."),
    "film": ("Funny thing about {v}: {d}.", "Oh and about {v}, {d}."),
    "concert": ("Best bit of the {v} show: {d}.", "Still buzzing from {v}, {d}."),
}.items():
    NAMED.setdefault(_key, {})["follow"] = _follow

assert set(REPLIES) == {t.key for t in TOPICS}, "every topic has its replies"
assert set(NAMED) <= {t.key for t in TOPICS}

# More ways to say each stage (merged into TOPICS below): the same kind of fact is
# phrased many ways, so no one template decides a mode's figure.
MORE: dict[str, dict[str, tuple[str, ...]]] = {
    "instrument": {
        "plan": (
            "Do you think thirty-five is too old to start the {v}?",
            "A friend is selling her old {v}, I'm weirdly tempted.",
        ),
        "event": (
            "Okay, it's happening: {v} lessons every Tuesday from now on.",
            "I've got a {v} in my living room and a teacher on speed dial now.",
            "Started learning the {v}! The neighbours are being very patient.",
        ),
        "follow": (
            "{d} gave me scales to practise, I'm hopeless but having fun.",
            "I practise every evening now, {d} would be proud.",
        ),
    },
    "race": {
        "plan": ("Long run this morning, the {v} is getting closer.",),
        "event": (
            "Medal around my neck, {v} done!",
            "I survived the {v}. Barely, but I did.",
            "Race day for the {v} was amazing, the crowd carried me.",
        ),
        "follow": ("Official result came in: {d}.",),
    },
    "pet": {
        "plan": ("I'm reading everything about looking after a {v}, just in case.",),
        "event": (
            "Say hello to our new {v}!",
            "We picked up a {v} from a breeder on Saturday, total chaos since.",
            "I caved and got a {v}. Best decision this year.",
        ),
        "follow": (
            "{d} has figured out how to open the kitchen door.",
            "Took {d} to the vet for the first check-up, all healthy.",
        ),
    },
    "trip": {
        "plan": ("Found a cheap hotel in {v}, we're really going!",),
        "event": (
            "Landed back home after {v}, jet lag is real.",
            "Greetings from sunny {v}!",
            "Our week in {v} flew by.",
        ),
        "follow": ("I can't stop telling people about {d}.",),
    },
    "job": {
        "plan": ("Second-round interview for a {v} job tomorrow, nervous.",),
        "event": (
            "They offered me the {v} job and I said yes!",
            "New chapter: I'm working as a {v} from Monday.",
        ),
        "follow": ("Honestly I didn't expect {d} at the new place, but I'll take it.",),
    },
    "health": {
        "event": (
            "Well, that explains the pain: it's a {v}.",
            "The scan showed a {v}, so I'm off my feet for a while.",
        ),
        "follow": ("Doing {d} now, slowly getting there.",),
    },
    "cooking": {
        "event": (
            "First attempt at {v} and nobody got food poisoning!",
            "Made {v} for friends tonight, plates were empty in minutes.",
        ),
        "follow": ("Everything came from {d}, I can't take the credit.",),
    },
    "book": {
        "event": ("Closed {v} just now and I need a minute.", "Read {v} in two days flat."),
    },
    "film": {
        "event": ("Movie night was {v}, what a ride.", "Caught {v} at the cinema yesterday."),
    },
    "purchase": {
        "event": (
            "Couldn't resist, the {v} is mine now.",
            "Picked up a {v} this weekend, I've wanted one forever.",
        ),
        "follow": ("Don't tell anyone, but I paid {d}.",),
    },
    "move": {
        "event": ("Keys in hand, we live in {v} now!", "Last box unpacked: home is {v} now."),
    },
    "workshop": {
        "event": ("Did a {v} over the weekend and loved every minute.",),
        "follow": ("I brought home {d}, it's on my shelf now.",),
    },
    "concert": {
        "event": ("Went to see {v} play, best night in ages.",),
    },
    "volunteer": {
        "event": ("I'm a volunteer at {v} now, first shift done.",),
        "follow": ("This week I was {d} the whole morning.",),
    },
    "family": {
        "event": ("Guess what, my {v}! Everyone's thrilled.",),
    },
    "hobby": {
        "event": ("Picked up {v} last month and now I'm addicted.",),
        "follow": ("Can't recommend {d} enough, it keeps me at it.",),
    },
    "language": {
        "event": ("First {v} class done, I can say hello and order coffee.",),
    },
    "project": {
        "event": ("After months of work, {v} is out the door.",),
    },
    "teamsport": {
        "event": ("I'm on a {v} now, who even am I.",),
    },
}

TOPICS = [
    replace(
        t, **{stage: (*getattr(t, stage), *more) for stage, more in MORE.get(t.key, {}).items()}
    )
    for t in TOPICS
]

GREETINGS = (
    *GREETINGS,
    "Hey {o}, you around?",
    "{o}! It's been forever.",
)
GREETING_REPLIES = (*GREETING_REPLIES, "Always! How are things?", "Hey! Perfect timing.")
CLOSINGS = (
    *CLOSINGS,
    ("I'll let you go, speak soon.", "Okay, talk soon!"),
    ("My battery is dying, more later!", "Haha, go charge it. Bye!"),
)
SMALLTALK = (
    *SMALLTALK,
    ("Is it just me or is this year flying by?", "It's not just you."),
    ("I've been so tired lately.", "Same, must be the season."),
    ("How's the weather where you are?", "Grey and drizzly, as usual."),
    ("Did you watch anything good lately?", "Not really, I keep rewatching old stuff."),
    ("What did you have for dinner?", "Leftovers, living the dream."),
    ("Work has been chaos.", "When is it not?"),
)


# Questions asked in the words that were said (`--worded`): what a person asks who
# remembers the conversation's own words ("What did Maria finish reading?" after "Done
# with Circe!"), as questions written by someone reading the turns often are. Each
# reuses a word most of the topic's event (or follow-up) phrasings carry, never the
# answer. Written from the utterances above, with no search run to choose them. A
# worded question's `when`, `detail` and anchor name the thing where NAMED can.
WORDED: dict[str, dict[str, tuple[str, ...]]] = {
    "instrument": {
        "what": (
            "What did {S} start taking lessons in{time}?",
            "What is {S} learning to play{time}?",
        ),
        "both": ("What lessons did {A} and {B} each start?",),
    },
    "race": {
        "what": ("What race did {S} finish{time}?", "Which race did {S} complete{time}?"),
        "list": ("Which races has {S} finished?", "What races has {S} completed?"),
        "both": ("What races did {A} and {B} each finish?",),
    },
    "pet": {
        "what": ("What did {S} adopt{time}?", "What new member of the family did {S} get{time}?"),
        "both": ("What did {A} and {B} each adopt?",),
    },
    "trip": {
        "what": ("Where did {S} spend a week{time}?", "Where did {S} get back from{time}?"),
        "list": ("Where has {S} been on a trip?", "Which places has {S} got back from?"),
        "both": ("Where did {A} and {B} each go on a trip?",),
        "detail": ("What was the highlight of {Ss} trip to {v}?",),
    },
    "job": {
        "what": ("What job did {S} get{time}?", "What did {S} start working as{time}?"),
        "both": ("What jobs did {A} and {B} each get?",),
    },
    "health": {
        "what": ("What was {S} diagnosed with{time}?", "What did the doctor say {S} had{time}?"),
        "both": ("What were {A} and {B} each diagnosed with?",),
    },
    "cooking": {
        "what": ("What did {S} make from scratch{time}?", "What did {S} make{time}?"),
        "list": ("What has {S} made from scratch?", "What dishes has {S} made?"),
        "both": ("What did {A} and {B} each make?",),
    },
    "book": {
        "what": ("What did {S} finish reading{time}?", "What book did {S} read{time}?"),
        "list": ("Which books has {S} read?", "What has {S} finished reading?"),
        "both": ("What did {A} and {B} each read?",),
        "detail": ("What did {S} think of the book {v}?",),
    },
    "film": {
        "what": ("What did {S} watch{time}?", "What movie did {S} see{time}?"),
        "list": ("Which movies has {S} watched?", "What has {S} watched?"),
        "both": ("What did {A} and {B} each watch?",),
        "detail": ("What happened at {Ss} movie night with {v}?",),
    },
    "purchase": {
        "what": ("What did {S} order{time}?", "What did {S} treat {Pp}self to{time}?"),
        "list": ("What has {S} bought?", "What has {S} ordered?"),
        "both": ("What did {A} and {B} each buy?",),
    },
    "move": {
        "what": ("Where did {S} move into{time}?", "What new place did {S} move into{time}?"),
        "both": ("Where did {A} and {B} each move?",),
    },
    "workshop": {
        "what": ("What workshop did {S} go to{time}?", "Which workshop did {S} do{time}?"),
        "list": ("Which workshops has {S} been to?",),
        "both": ("What workshops did {A} and {B} each go to?",),
    },
    "concert": {
        "what": ("Who did {S} see live{time}?", "Which gig did {S} go to{time}?"),
        "list": ("Who has {S} seen live?",),
        "both": ("Who did {A} and {B} each see live?",),
        "detail": ("What was the best bit of the {v} show for {S}?",),
    },
    "volunteer": {
        "what": ("Where did {S} start volunteering{time}?", "Where does {S} volunteer{time}?"),
        "both": ("Where do {A} and {B} each volunteer?",),
    },
    "family": {
        "what": ("What was {Ss} family news{time}?", "What happened to {Ss} family{time}?"),
        "both": ("What family news did {A} and {B} each have?",),
        "detail": ("How did {Ss} family celebrate?",),
    },
    "hobby": {
        "what": ("What did {S} get really into{time}?", "What is {Ss} new obsession{time}?"),
        "both": ("What did {A} and {B} each get into?",),
    },
    "language": {
        "what": (
            "What language did {S} start learning{time}?",
            "Which lessons did {S} start{time}?",
        ),
        "both": ("What languages did {A} and {B} each start learning?",),
    },
    "project": {
        "what": ("What did {S} ship at work{time}?", "What did {S} finally wrap up{time}?"),
        "both": ("What did {A} and {B} each ship at work?",),
    },
    "teamsport": {
        "what": ("What did {S} join{time}?", "What did {S} sign up to{time}?"),
        "both": ("What teams did {A} and {B} each join?",),
    },
}
assert set(WORDED) == {t.key for t in TOPICS}


def worded(topic: Topic) -> Topic:
    """The topic with its questions asked in the turns' words (WORDED)."""
    words = WORDED[topic.key]
    return replace(
        topic,
        q_what=words["what"],
        q_list=words.get("list", ()) if topic.q_list else (),
        q_both=words["both"],
        q_detail=words.get("detail", topic.q_detail),
    )
