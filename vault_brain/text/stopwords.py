"""Small stopword lists: the function words of each language, lowercase.

They serve twice: the analyser drops them (index and query side), and the language
detector counts them (a note with many of one list's words is in that language). So
each list holds only words that are clearly function words of its own language (articles,
pronouns, prepositions, conjunctions, auxiliaries, question words) and, where two
languages are close (da/no, cs/sk, es/ca/pt, ru/uk, ar/fa), the forms that tell them
apart. Written for this project from general knowledge of each language.
"""

from __future__ import annotations

_RAW = {
    "en": """
        a about above after again against all also am an and any are as at be been before
        being below between both but by can could did do does doing down during each few
        for from further had has have having he her here hers herself him himself his how i
        if in into is it its itself just me more most my myself no nor not of off on once
        only or other our ours ourselves out over own same she should so some such than that
        the their theirs them themselves then there these they this those through to too
        under until up very was we were what when where which while who whom whose why will
        with would you your yours yourself yourselves s t d ll m re ve
    """,
    "de": """
        aber alle allem allen aller alles als also am an andere anderem anderen anderer
        anderes auch auf aus bei beim bin bis bist da damit dann das dass daß dein deine
        deinem deinen deiner dem den denn der deren des dessen dich die dies diese diesem
        diesen dieser dieses dir doch dort du durch ein eine einem einen einer eines er es
        etwas euch euer eure eurem euren eurer für gegen gewesen hab habe haben hat hatte
        hatten hier hin hinter ich ihm ihn ihnen ihr ihre ihrem ihren ihrer ihres im in
        indem ins ist jede jedem jeden jeder jedes jene jenem jenen jener jenes jetzt kann
        kein keine keinem keinen keiner keines man manche mein meine meinem meinen meiner
        mich mir mit muss nach nicht nichts noch nun nur ob oder ohne sehr sein seine seinem
        seinen seiner selbst sich sie sind so solche soll sondern sonst über um und uns
        unser unsere unserem unseren unter vom von vor war waren was weil welche welchem
        welchen welcher welches wenn werde werden wie wieder wir wird wo wurde wurden zu
        zum zur zwischen
    """,
    "fr": """
        à au aux avec ce ceci cela ces cet cette comment dans de des donc dont du elle elles
        en entre est et été être eux il ils je la le les leur leurs lui ma mais me même mes
        moi mon ne ni nos notre nous on ont ou où par pas pour pourquoi qu quand que quel
        quelle quelles quels qui sa sans se ses si son sont sous sur ta te tes toi ton tous
        tout toute toutes tu un une vos votre vous ça c d j l m n s t y ai as avez avons
        suis es sommes êtes était étaient sera seront soit aussi très plus
    """,
    "es": """
        a al algo algunas algunos ante antes como cómo con contra cual cuál cuales cuáles
        cuando cuándo de del desde donde dónde durante e el él ella ellas ellos en entre
        era eran eres es esa esas ese eso esos esta está estaba estamos están estar estas
        este esto estos estoy fue fueron ha han has hasta hay he la las le les lo los más
        me mi mí mis mucho muy nada ni no nos nosotros o os otra otras otro otros para pero
        poco por porque qué que quien quién quienes se sea ser si sí sin sobre son soy su
        sus también te ti todo todos tu tú tus un una uno unos y ya yo
    """,
    "it": """
        a ad agli ai al alla alle allo anche che chi ci come con cosa cui da dagli dai dal
        dalla dalle dallo degli dei del della delle dello di dove e è ed era erano essere
        gli ha hai hanno ho i il in io la le lei li lo loro lui ma mi mia mie miei mio ne
        negli nei nel nella nelle nello noi non nostra nostro o per perché più quale quando
        quanto quella quelle quelli quello questa queste questi questo se sei si siamo siete
        sono su sua sue sugli sui sul sulla sulle suo suoi ti tra tu tua tuo tutti tutto un
        una uno voi vostro
    """,
    "pt": """
        a à ao aos as às até com como da das de dela dele deles depois do dos e é ela elas
        ele eles em entre era essa essas esse esses esta está estão estas este estes eu foi
        foram há isso isto já lhe mais mas me mesmo meu minha muito na não nas nem no nos
        nós num numa o onde os ou para pela pelas pelo pelos por porque qual quando que quem
        se sem ser seu seus só sua suas também te tem têm tu um uma umas uns você vocês
    """,
    "nl": """
        aan al als bij dan dat de deze die dit door een en er geen had heb hebben heeft het
        hier hij hoe hun ik in is je kan kunnen maar me meer met mijn naar niet nog nu of
        om omdat ons ook op over te tot u uit uw van voor waar wanneer was wat welke wie
        wij wil worden wordt zal ze zelf zich zij zijn zo zonder
    """,
    "sv": """
        alla allt att av blev bli blir de dem den denna deras dess det detta dig din dina
        ditt du där efter eller en er ett från för ha hade han hans har hennes hon honom
        hur här i icke ingen inom inte jag ju kan kunde man med mellan men mig min mina
        mitt mot mycket ni nu när någon något några och om oss på samma sedan sig sin sina
        sitt själv skulle som så sådan till under upp ut utan vad var varför vara varit
        vars vem vi vid vilka vilken vilket våra vårt än är åt över
    """,
    "da": """
        af alle alt anden at bare blev blive bliver både da de dem den denne der deres det dette dig
        din dine disse dit dog du efter eller en er et for fordi fra før ham han hans har
        havde have hende hendes her hos hun hvad hvem hver hvilke hvilken hvis hvor hvordan
        hvorfor i ikke ind jeg jer jeres jo kan
        kun kunne man mange med meget men mig min mine mit mod når nogen noget nogle nu og
        også om op os over på selv sig sin sine sit skal skulle som så sådan thi til ud under var
        vores være været vi vil ville vor
    """,
    "no": """
        alle alt at av bare ble blir blitt både da de deg dem den denne der dere deres det
        dette din dine disse ditt du eller en enn er et ett etter for fordi fra før ha hadde ham
        han hans har her henne hennes hun hva hvem hver hvilke hvilken hvis hvor hvordan hvorfor
        i ikke inn jeg kan kun kunne man mange med meg mellom men min mine mitt mot mye nå
        når noe noen og også om opp oss over på seg selv sin sine sitt skal skulle slik som
        så til under uten ut var vi vil ville vår vårt våre være vært
    """,
    "fi": """
        aina avulla ei eivät eli emme en ennen eri et ette että he hän ilman ja jo joita
        joiden joka jolla jonka jos jota jotka jälkeen kaikki kanssa kautta koska kuin
        kuinka kuten kun me mikä miksi minä missä mistä miten mitä mukaan mutta myös ne
        niiden niin nyt näin nämä näitä ole oli olla olen olet olemme olette olin olisi
        olit olivat ollut on ovat se sekä sen siihen siinä siitä sillä sinun sinä sitä
        tai te tämä tämän tätä tuo vaan vai vaikka vain vielä voi voidaan voit voin itse
    """,
    "hu": """
        a abban ahogy aki akik akkor alatt amely amelyek amely ami amikor amit annak arra
        az azok azonban azt de egy egyes el ennek erre és ez ezek ezt fel hanem hiszen hogy
        hogyan hol illetve is ki kell lehet lesz lett majd már meg mellett mert mi miért
        mikor milyen minden mint mit most nagyon nem neki olyan pedig sem szerint tehát
        után vagy vagyis van volt
    """,
    "ro": """
        a acea aceasta această aceea acel acele acest acesta aceste acești ai al ale am
        ar are au că ca care ce cea cei cel cele cine cu cum când dacă dar de decât despre
        din după este ei el ele eu fără fi fost iar în între la le lor lui mai nici noi nu
        o ori pe pentru peste poate prin sau se să sunt și şi tot toate un una unde unei unui
        voi vă
    """,
    "tr": """
        ama ancak bazı ben bir biri birçok biz bu da daha de değil diye en eğer gibi göre
        hangi hem her hiç için ile ise kadar ki kim mi mı mu mü nasıl ne neden nerede o
        olan olarak onlar sen siz sonra şey şu tüm ve veya ya yani yok var çok çünkü
    """,
    "id": """
        ada adalah agar akan anda antara apa atau bagaimana bahwa belum bisa dalam dan dapat
        dari dengan di dia ini itu jika juga kalau kami kamu karena ke kita lebih mana
        mengapa mereka namun oleh pada saat saja sama sangat saya sebagai sebelum sedang
        seperti serta setelah siapa sudah supaya telah tentang tersebut tetapi tidak untuk
        yang
    """,
    "ca": """
        a al als amb aquell aquella aquest aquesta aquestes aquests així això allò com de
        del dels el els ell ella elles ells em en ens entre és et fins ha han hi ho
        i jo la les li més molt no nosaltres o on per però perquè quan que què qui quin
        quina quins quines se sense ser seu seva seus seves si sobre són també té tu un una
        uns unes us va vosaltres
    """,
    "cs": """
        a aby ale ani ano asi až bez bude budou by byl byla byli bylo být co či do ho i jak
        jako je jeho její jejich jen jenž ještě již jsem jsi jsme jsou jste k kam kde kdo
        kdy když který která které kteří mezi mi mít mu my na nad nebo než ní o od on ona
        oni ono pak po pod pokud pro proč protože před při s se si tak také tam tedy ten
        tento to toho tom tu ty tyto u už v ve však všechno z za že
    """,
    "sk": """
        a aby ak ako ale alebo ani áno až bez bol bola boli bolo bude budú by byť čo do ho
        i ich im ja je jeho jej ju k kde keď kto ktorá ktoré ktorí ktorý len ma medzi mi
        mu my na nad nie o od on ona oni ono po pod pre pred prečo pretože pri s sa si
        sme som ste sú tak tam teda tento tiež to toho tom tu tým už v vo však z za že
    """,
    "pl": """
        a aby albo ale bardzo bez by był była było byli być będzie ci co czy dla do gdy
        gdzie go i ich jak jaki jakie jako je jego jej jest jestem jeszcze jeśli już kiedy
        która które który lub ma mi mnie może można na nad nie nich nim o od oraz po pod
        przez przed przy są się ta tak także te tego tej ten to tu tylko tym w we więc z
        za ze że żeby
    """,
    "vi": """
        và của là các những một này được cho với để trong khi thì đã sẽ đang cũng như
        không có từ theo về bạn tôi nó họ nếu nhưng hoặc vì nên rất ở trên ra vào lại còn
        mà thế nào gì sao đâu
    """,
    "ru": """
        а без более бы был была были было быть в вам вас весь во вот все всего всех вы
        где да даже для до его ее её ей ему если есть еще ещё же за здесь и из или им их к
        как какая какие какой когда кто ли либо между меня мне может можно мой мы на над
        надо наш не него нее неё нет ни них но ну о об однако он она они оно от очень по
        под при про с сам свой себя со так также такой там те тем то того тоже той только
        том ты у уже хотя чего чем что чтобы чье эта эти это этого этой этом этот я
    """,
    "uk": """
        а або але без би був була були було бути в вам вас ви від вже він вона вони воно
        все всі де для до є його її їй їм їх з за зі і із й коли крім ли лише між мене мені
        ми може можна на над не ні про під при так також там те теж ти то тобто той тому
        того тільки ту у хто це цей ці ця чи що щоб як який яка які яке я
    """,
    "el": """
        αλλά αν από αυτά αυτές αυτή αυτό αυτός για δεν εάν είναι ένα ένας έχει έχουν η ή θα
        και κάθε με μετά μη μην μια μόνο να ο οι όπως όταν ότι πιο ποια ποιο ποιος που πού
        πριν πώς σε στα στη στην στις στο στον στους τα τη την της τι τις το τον του τους
        των ως
    """,
    "ar": """
        أن أو أي إذا إلى إن التي الذي الذين بعد بعض بين ثم حتى عن على عند غير في قبل قد
        كان كانت كل كما كيف لا لم لماذا لن ما متى مع من هذا هذه هل هم هو هي أين ذلك تلك
        نحن أنت أنا
    """,
    "fa": """
        آن آنها از است اگر اما او این با باید برای بر به تا چرا چه چگونه خود در را شد
        شده شود که کرد کند کنید می نمی هم همه نیز هر و یا یک ای های ها من تو ما شما
        وقتی کجا بود دارد
    """,
    "he": """
        של את על עם זה זו זאת הוא היא הם הן אני אתה את אנחנו לא כן כי אם או גם רק כל מה מי
        איך למה מתי איפה יש אין היה הייתה יהיה אבל אז כמו לפני אחרי בין
    """,
    "hi": """
        का के की है में और को से एक यह वह पर भी नहीं हैं था थी थे तो कि जो कर किया गया हो
        होता होती होते लिए साथ अपने कुछ इस उस ये वे क्या कैसे क्यों कब कहाँ या लेकिन अगर जब
        तक हम आप मैं
    """,
    "ne": """
        छ छन् हो र मा पनि यो त्यो भएको गर्न लागि गरेको थियो हुन्छ हुन गर्नुहोस् तपाईं
        तपाईंको यस उनी
    """,
    "bn": """
        এবং ও এই সেই যে কি কী না হয় হবে ছিল করে করা থেকে জন্য সঙ্গে সাথে একটি একটা আর তার
        তাদের আমি আপনি তুমি আমরা কোন কোনো কেন কীভাবে কখন কোথায় যদি তবে কিন্তু বা অথবা
    """,
}

STOPWORDS: dict[str, frozenset[str]] = {
    lang: frozenset(words.split()) for lang, words in _RAW.items()
}
