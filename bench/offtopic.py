"""Questions a vault cannot answer, to measure the relevance cut-off (`search.min_score`).

Two kinds per vault language: keyboard mash and made-up words (nothing should match), and
everyday questions on topics the vault is not about (cooking, sport, geography, pets), asked
the way people ask. The cut-off must return nothing for these while keeping the judged
answers to the real questions (bench/quality.py reports both). Written for this benchmark;
no evaluation set's text is in here.
"""

from __future__ import annotations

NONSENSE = [
    "xyzzyplugh frobnicate",
    "qwertyuiop zxcvbnm",
    "asdfghjkl lkjhgfdsa",
    "blorptastic wumbleflux quandrivate",
    "zzqx vvbn mmkl",
    "floopdoodle snergwhistle",
    "grolnik trazzenbock 8841",
    "hjkl yuio bnmv",
    "snarfblat ooglyboogly",
    "prxqz tlkmvw",
]

OFF_TOPIC = {
    "en": [
        "what is a good recipe for banana bread",
        "how tall is mount everest",
        "who painted the mona lisa",
        "how do I teach my puppy to sit",
        "what are the best hiking trails in patagonia",
        "when did the roman empire fall",
        "how many calories are in an avocado",
        "what time does the sun set in reykjavik in june",
        "how do I remove a red wine stain from a carpet",
        "which team won the 1998 football world cup",
        "what should I pack for a week at the beach",
        "how long should I boil an egg for a runny yolk",
        "what is the capital of australia",
        "how do I repot an orchid",
        "who wrote pride and prejudice",
    ],
    "de": [
        "Wie backe ich ein gutes Roggenbrot?",
        "Wie hoch ist die Zugspitze?",
        "Wer hat die Neunte Sinfonie komponiert?",
        "Wie bringe ich meinem Hund bei, an der Leine zu laufen?",
        "Welche Wanderwege gibt es im Schwarzwald?",
        "Wann fiel die Berliner Mauer?",
        "Wie viele Kalorien hat eine Banane?",
        "Wie entferne ich Rotweinflecken aus einem Teppich?",
        "Wer wurde 2014 Fußballweltmeister?",
        "Wie lange muss ein Ei kochen, damit es weich bleibt?",
        "Was ist die Hauptstadt von Kanada?",
        "Wie topfe ich eine Orchidee um?",
    ],
    "fr": [
        "Quelle est la meilleure recette de crêpes ?",
        "Quelle est la hauteur du mont Blanc ?",
        "Qui a peint les Nymphéas ?",
        "Comment apprendre à mon chien à rester assis ?",
        "Quels sont les plus beaux sentiers de randonnée en Corse ?",
        "En quelle année a eu lieu la prise de la Bastille ?",
        "Combien de calories contient un croissant ?",
        "Comment enlever une tache de vin rouge sur un tapis ?",
        "Qui a gagné la Coupe du monde de football en 2018 ?",
        "Combien de temps faut-il cuire un œuf à la coque ?",
        "Quelle est la capitale du Canada ?",
        "Comment rempoter une orchidée ?",
    ],
    "es": [
        "¿Cuál es la mejor receta de paella valenciana?",
        "¿Qué altura tiene el Aconcagua?",
        "¿Quién pintó Las meninas?",
        "¿Cómo enseño a mi perro a sentarse?",
        "¿Cuáles son las mejores rutas de senderismo en los Pirineos?",
        "¿En qué año llegó Colón a América?",
        "¿Cuántas calorías tiene un aguacate?",
        "¿Cómo quito una mancha de vino tinto de la alfombra?",
        "¿Quién ganó el Mundial de fútbol de 2010?",
        "¿Cuánto tiempo hay que hervir un huevo pasado por agua?",
        "¿Cuál es la capital de Australia?",
        "¿Cómo trasplanto una orquídea?",
    ],
    "ja": [
        "美味しいカレーの作り方を教えてください。",
        "富士山の高さはどれくらいですか？",
        "モナリザを描いたのは誰ですか？",
        "子犬にお座りを教えるにはどうすればいいですか？",
        "北海道でおすすめのハイキングコースはどこですか？",
        "江戸幕府が終わったのはいつですか？",
        "バナナ一本のカロリーはどれくらいですか？",
        "カーペットについた赤ワインのしみを落とす方法は？",
        "2011年の女子サッカーワールドカップで優勝したのはどこですか？",
        "半熟卵は何分ゆでればいいですか？",
        "オーストラリアの首都はどこですか？",
        "胡蝶蘭の植え替えはどうやりますか？",
    ],
}


def offtopic_queries(language: str) -> list[tuple[str, str]]:
    """(kind, query) pairs for a vault written in `language`."""
    return [("nonsense", q) for q in NONSENSE] + [
        ("off-topic", q) for q in OFF_TOPIC.get(language, OFF_TOPIC["en"])
    ]
